"""A caller's standing against its USD caps, in the words Claude Code reads: the
``anthropic-ratelimit-unified-*`` headers on each answer, the 429 ``billing_error`` at the cap, and
``GET /api/oauth/usage`` (the Claude Code gateway protocol's "Usage-limit headers").

Our caps are rolling windows (``accounts.budgetwindows``), not calendar periods, so "when it
resets" needs a definition. It is **the next moment what counts against the cap falls**: the
instant the oldest slice still holding spending leaves the window; at the cap, the instant enough
has left for requests to pass again (the ``Retry-After`` of the refusal). With nothing spent, when
spending made now would leave. Each is a slice's end plus the window's length, so every process,
and every read of the same counters, names the same second: the headers of an answer and
``/api/oauth/usage`` read just after it agree to the second, as the client wants them to.

Periods: the 24-hour window is ``daily``, the 7-day one ``weekly``, the 30-day one ``monthly``
(the admin API's periods set exactly these); the 5-hour window has no period in the protocol, so
its refusal carries none (the client then shows the message alone, as it does for any cap).

Several caps: the headers describe the fullest one; once refused, the one that frees last (the
rule of Anthropic's own gateway). A budget a whole team shares (``Budget.pool``) is refused with
``anthropic-ratelimit-unified-overage-scope: group_pool``: the user's own cap is not what blocked them.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accounts.budgetwindows import Window

from ..errors import SpendCapReached
from .budgets import Budget
from .store import Granted

PERIODS = {"day": "daily", "week": "weekly", "month": "monthly"}
THRESHOLDS = (0.95, 0.75)  # highest first: the one a utilization has passed
DEFAULT_HELP = "ask your gateway's administrators if you need it raised"
_H = "anthropic-ratelimit-unified-"


@dataclass(frozen=True)
class Standing:
    budget: Budget
    used: int  # micro-dollars spent in the window
    resets_at: int  # Unix seconds (see the module's docstring)

    @property
    def limit(self) -> int:
        return self.budget.limit

    @property
    def exceeded(self) -> bool:
        return self.used >= self.budget.limit

    @property
    def utilization(self) -> float:
        return self.used / self.budget.limit if self.budget.limit > 0 else 1.0

    @property
    def period(self) -> str | None:
        return PERIODS.get(self.budget.window.name)

    @property
    def shown(self) -> float:
        """The fraction the headers send: two decimals, kept under 1 while requests are allowed."""

        fraction = round(self.utilization, 2)
        return fraction if self.exceeded else min(fraction, 0.99)


def reset_at(window: Window, limit: int, granted: Granted, now: float) -> int:
    if granted.used >= limit and granted.freeing is not None:
        return window.out_at(granted.freeing)
    if granted.used < limit and granted.oldest is not None:
        return window.out_at(granted.oldest)
    return window.out_at(window.slice_of(now))  # nothing spent, or a limit of 0 (frees when raised)


def standing_of(budget: Budget, granted: Granted, now: float) -> Standing:
    return Standing(budget, granted.used, reset_at(budget.window, budget.limit, granted, now))


def binding(standings: Sequence[Standing]) -> Standing | None:
    """The cap to describe: a refused one over an allowed one; among refused ones the one that frees
    last; among allowed ones the fullest."""

    best: Standing | None = None
    for s in standings:
        if best is None:
            best = s
        elif s.exceeded != best.exceeded:
            best = s if s.exceeded else best
        elif s.exceeded:
            best = s if s.resets_at > best.resets_at else best
        elif s.utilization > best.utilization:
            best = s
    return best


def answer_headers(standings: Sequence[Standing]) -> dict[str, str]:
    """The headers of a successful answer: the binding cap's standing (none without a cap)."""

    s = binding(standings)
    if s is None:
        return {}
    reset = str(s.resets_at)
    passed = next((t for t in THRESHOLDS if s.utilization > t), None)
    status = "allowed_warning" if passed is not None else "allowed"
    headers = {_H + "status": status, _H + "reset": reset, _H + "overage-reset": reset,
               _H + "overage-utilization": f"{s.shown:g}", _H + "representative-claim": "overage",
               _H + "overage-status": status}
    if passed is not None:
        headers[_H + "overage-surpassed-threshold"] = f"{passed:g}"
    return headers


def refusal(standings: Sequence[Standing], now: float, help_text: str = DEFAULT_HELP) -> SpendCapReached:
    """The 429 ``billing_error`` for a caller at its cap: no ``representative-claim`` or
    ``overage-status`` (with them Claude Code writes its own line and drops ours), one sentence
    that says when it frees and what to do."""

    s = binding([x for x in standings if x.exceeded])
    assert s is not None, "a refusal needs a cap that is reached"
    reset = str(s.resets_at)
    headers = {"Retry-After": str(max(1, math.ceil(s.resets_at - now))), _H + "status": "rejected",
               _H + "reset": reset, _H + "overage-reset": reset, _H + "overage-utilization": "1",
               _H + "overage-surpassed-threshold": "1",
               _H + "overage-disabled-reason": "org_spend_cap_reached"}
    if s.period is not None:
        headers[_H + "overage-period"] = s.period
    if s.budget.pool:
        headers[_H + "overage-scope"] = "group_pool"
    budget, window = s.budget, s.budget.window
    whose = "Your team's shared" if budget.pool else "This key's"
    if budget.limit == 0:
        frees = "it frees only when it is raised"
    else:
        frees = f"it frees {dt.datetime.fromtimestamp(s.resets_at, dt.timezone.utc):%b %-d at %H:%M} UTC"
    return SpendCapReached(f"{whose} {window.adjective} USD budget of {budget.amount(budget.limit)} is used up "
                           f"({budget.amount(s.used)} in {window.phrase}); {frees}; {help_text}",
                           headers=headers)


def cents(micro: int) -> int:
    return micro // 10_000


def percent(s: Standing) -> int:
    return round(s.shown * 100)


def iso(seconds: int) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def usage_document(standings: Sequence[Standing], uncapped: dict[str, int] | None = None) -> dict[str, Any]:
    """``GET /api/oauth/usage``: the binding cap in ``extra_usage`` (cents, whole percents), one
    ``limits`` row per cap with the same reset instant as its headers. ``uncapped``: for a caller
    without a cap, what it spent this UTC month, day and week (from Monday), in cents."""

    s = binding(standings)
    if s is None:
        spent = uncapped or {"month": 0, "day": 0, "week": 0}
        return {"extra_usage": {"is_enabled": True, "monthly_limit": None, "used_credits": spent["month"],
                                "utilization": None, "currency": "USD",
                                "daily": {"limit": None, "used_credits": spent["day"], "utilization": None},
                                "weekly": {"limit": None, "used_credits": spent["week"], "utilization": None}},
                "limits": []}
    return {
        "extra_usage": {"is_enabled": True, "monthly_limit": cents(s.limit), "used_credits": cents(s.used),
                        "utilization": percent(s), "currency": "USD"},
        "limits": [{"kind": "spend", "group": x.period or x.budget.window.name, "percent": percent(x),
                    "resets_at": iso(x.resets_at), "severity": _severity(x), "is_active": x is s}
                   for x in standings],
    }


def _severity(s: Standing) -> str:
    if s.exceeded or s.utilization > 0.95:
        return "critical"
    return "warning" if s.utilization > 0.75 else "normal"
