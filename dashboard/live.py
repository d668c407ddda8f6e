"""What a dashboard page receives over the websocket for each pool event (synchronous, database side).

Rows are rendered with the same partial templates as the pages, so a row that
arrives live looks exactly like one rendered on reload.
"""

from __future__ import annotations

from typing import Any

from django.template.loader import render_to_string

from accounts import formats
from accounts.models import Account, DisableEvent, RequestLog

from . import accounttable, actions, overviewfigures, stats
from .templatetags.dash import back_in_pool, last_test, num

MAX_ROWS = 50


def account_fields(account: Account, disabled_by: DisableEvent | None = None) -> dict[str, Any]:
    """The live-updated cells of an account (``data-field`` names on the pages), as displayed;
    ``disabled_by``: its latest open disable event."""

    return {
        "id": account.pk,
        "status": account.status,
        "fields": {
            "status": account.get_status_display(),
            "cooldown_until": back_in_pool(account),
            "why_disabled": actions.why(disabled_by),
            "last_test": last_test(account),
            "last_used_at": formats.when(account.last_used_at),
            "balance": formats.money(account.balance),
            "requests": num(account.requests),
            "errors": num(account.errors),
            "tokens": f"{num(account.input_tokens)} / {num(account.output_tokens)}",
        },
    }


def accounts(ids: list[int]) -> list[dict[str, Any]]:
    events = actions.open_events(ids[:MAX_ROWS])
    return [account_fields(a, events.get(a.pk)) for a in Account.objects.filter(pk__in=ids[:MAX_ROWS]).order_by("pk")]


def providers(account_ids: list[int]) -> list[dict[str, Any]]:
    """The accounts page's summary rows of these accounts' providers, as displayed."""

    if not account_ids:
        return []
    wanted = list(Account.objects.filter(pk__in=account_ids[:MAX_ROWS]).values_list("provider_id", flat=True)
                  .distinct())
    return [{"id": s.name, "fields": s.fields()} for s in accounttable.summary(wanted)]


def _pool(account_ids: list[int]) -> dict[str, Any]:
    return {"accounts": accounts(account_ids), "providers": providers(account_ids)}


def requests_logged(payload: dict[str, Any]) -> dict[str, Any]:
    ids = [r["request_id"] for r in payload.get("requests", [])][-MAX_ROWS:]
    rows = (RequestLog.objects.filter(request_id__in=ids).select_related("account", "provider")
            .order_by("created_at", "id"))
    return {
        "kind": "requests.logged",
        "rows": [{"id": row.request_id, "html": render_to_string("dashboard/_request_row.html", {"row": row})}
                 for row in rows],
        **_pool(list(payload.get("accounts", []))),
    }


def _event_html(event: DisableEvent) -> dict[str, Any]:
    return {"id": event.pk, "html": render_to_string("dashboard/_event_row.html", {"event": event})}


def account_disabled(payload: dict[str, Any]) -> dict[str, Any]:
    account_id = payload.get("account_id")
    # A payload without an account matches no row (account_id IS NULL); the stubs want an id.
    qs = DisableEvent.objects.select_related("account__provider").filter(account_id=account_id)  # type: ignore[misc]
    event = (qs.filter(pk=payload["event_id"]) if payload.get("event_id") else qs.order_by("-created_at", "-id")).first()
    return {"kind": "account.disabled", "events": [_event_html(event)] if event else [],
            **_pool([account_id] if account_id else [])}


def account_enabled(payload: dict[str, Any]) -> dict[str, Any]:
    account_id = payload.get("account_id")
    # As in account_disabled: None matches no row.
    ended = (DisableEvent.objects.select_related("account__provider")
             .filter(account_id=account_id, ended_at__isnull=False).order_by("-ended_at")[:5])  # type: ignore[misc]
    return {"kind": "account.enabled", "events": [_event_html(e) for e in ended],
            **_pool([account_id] if account_id else [])}


def overview(window_key: str) -> str:
    """The overview's tiles and charts for a window, rendered as on the page."""

    window = stats.window_from(window_key)
    return render_to_string("dashboard/_overview_figures.html", overviewfigures.figures(window))


BUILDERS = {
    "requests.logged": requests_logged,
    "account.disabled": account_disabled,
    "account.enabled": account_enabled,
}
