"""Formatting for the dashboard's figures."""

from __future__ import annotations

from django import template
from django.http import QueryDict

from accounts import formats
from accounts.headroom import summary as headroom_summary
from accounts.models import Account
from accounts.outcomes import ErrorClass, Verdict

register = template.Library()

register.filter("when", formats.when)
register.filter("short_when", formats.short_when)
register.filter("money", formats.money)


@register.filter
def back_in_pool(account: Account) -> str:
    """When an account out of the pool may be back: its cool-down's end, or its next scheduled test."""

    if account.cooldown_until:
        return formats.when(account.cooldown_until)
    if account.retest_at and account.status == Account.DISABLED and not account.disabled_by_hand:
        return f"next test {formats.when(account.retest_at)}"
    return "—"


LAST_TEST_CHARS = 60


@register.filter
def last_test(account: Account) -> str:
    """The account's last test (the prober's, whoever asked for it): "OK at 2026-11-25 07:12:37 UTC"."""

    if account.probe_requested_at is not None:
        return "queued"
    if account.probed_at is None:
        return "—"
    summary = account.probe_summary or ("OK" if account.probe_ok else "failed")
    if len(summary) > LAST_TEST_CHARS:  # the whole of it is on the account's admin page
        summary = summary[:LAST_TEST_CHARS - 1] + "…"
    return f"{summary} at {formats.short_when(account.probed_at)}"


@register.filter
def rate_limits(account: Account) -> str:
    """What the account has left of its provider's rate limits, as the gateway last wrote it."""

    return headroom_summary(account.headroom) or "—"


AFFINITY = {"kept": "kept on its account", "assigned": "assigned an account", "moved": "moved"}
MOVES = {"unavailable": "its account was disabled, cooling down or removed",
         "quota": "its account's rate limit was used up", "busy": "its account was at its concurrency cap",
         "failed": "its account failed this request"}


@register.filter
def affinity(row: object) -> str:
    """A request-log row's session affinity, as a sentence: "moved (its account's rate limit was used up)"."""

    decision = str(getattr(row, "affinity", "") or "")
    if not decision:
        return "—"
    text = AFFINITY.get(decision, decision)
    reason = str(getattr(row, "affinity_reason", "") or "")
    if reason:
        text += f" ({MOVES.get(reason, reason)})"
    signal = str(getattr(row, "session_signal", "") or "")
    return f"{text}; session named by {signal}" if signal else text


@register.filter
def verdict(value: object) -> str:
    """An attempt's verdict as the dashboard names it (the attempt trace stores the value)."""

    try:
        return str(Verdict(str(value)).label)
    except ValueError:
        return str(value or "—")


@register.filter
def error_class(value: object) -> str:
    try:
        return str(ErrorClass(str(value)).label)
    except ValueError:
        return str(value or "—")


@register.filter
def num(value: object) -> str:
    """12345 → 12,345; None → —."""

    if value is None or value == "":
        return "—"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"  # type: ignore[call-overload]


@register.filter
def ms(value: object) -> str:
    if value is None:
        return "—"
    v = float(value)  # type: ignore[arg-type]
    return f"{v / 1000:.2f} s" if v >= 10_000 else f"{v:.0f} ms"


@register.filter
def pct(value: object) -> str:
    if value is None:
        return "—"
    return f"{float(value) * 100:.1f} %"  # type: ignore[arg-type]


@register.filter
def status_class(status: int | None) -> str:
    if status is None:
        return "s-none"
    return f"s-{status // 100}xx"


@register.filter
def redacted(text: str | None) -> str:
    """Stored excerpts and bodies were redacted when written; this is the second lock on the door."""

    from accounts.redact import redact

    return redact(text or "", limit=len(text or ""))


@register.filter
def rate(value: float | None) -> str:
    """Per-minute rates: small ones keep two significant digits rather than rounding to 0.0."""

    if value is None:
        return "—"
    return f"{value:,.1f}" if value >= 10 else f"{value:.2g}"


@register.simple_tag(takes_context=True)
def query_with(context: template.Context, **changes: object) -> str:
    """This page's querystring with ``changes`` applied (a value of None or "" removes the parameter),
    so a link changes one thing (the window, the sort, the page) and keeps the filters."""

    params: QueryDict = context["request"].GET.copy()
    for name, value in changes.items():
        if value is None or value == "":
            params.pop(name, None)
        else:
            params[name] = str(value)
    return "?" + params.urlencode()
