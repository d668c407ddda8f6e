"""``GET /api/oauth/usage``: the caller's dollars and percent against its USD caps, where Claude Code
(signed in to a gateway) reads them for ``/usage`` and its status line (the Claude Code gateway
protocol's "Usage-limit headers"; the document itself: ``gateway.limits.standing.usage_document``).

A caller with caps gets each cap's standing, read from the same counters the limits keep (no
reservation): the reset instants are those its answers' headers carry. A caller without one
gets what it spent this UTC month, day and week (from Monday), in cents.
"""

from __future__ import annotations

import datetime as dt
import time
from decimal import Decimal
from typing import TYPE_CHECKING


from accounts.budgetwindows import KEY, Subject
from accounts.db import DatabaseUnavailable, hop

from ..edge.request import ApiRequest
from ..edge.responses import ApiResponse, error_response, json_response
from ..errors import GatewayError, unavailable
from ..limits.budgets import UsdSpent, usd_logged
from ..limits.standing import usage_document
from .auth import authenticate

if TYPE_CHECKING:
    from ..app import Gateway

UTC = dt.timezone.utc
HOUR = 3600  # the day, the week from Monday and the month all start on an hour


def calendar_starts(now: float) -> dict[str, dt.datetime]:
    """The starts of the UTC day, week (Monday) and month ``now`` falls in."""

    day = dt.datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return {"day": day, "week": day - dt.timedelta(days=day.weekday()), "month": day.replace(day=1)}


def spent_in_cents(spent: UsdSpent, key_id: int, now: float) -> dict[str, int]:
    """What ``key_id`` spent since each of :func:`calendar_starts`, in whole cents (sync)."""

    starts = calendar_starts(now)
    slices = spent(Subject(KEY, key_id, ""), min(starts.values()), HOUR)
    out = {}
    for name, start in starts.items():
        usd = sum((v for at, v in slices.items() if at >= start.timestamp()), Decimal(0))
        out[name] = int(usd * 100)
    return out


async def oauth_usage(gw: Gateway, request: ApiRequest) -> ApiResponse:
    try:
        snap = await gw.config.get()
        key = await authenticate(request, snap, True, gw.config)
        standings = await gw.limits.standings(key)
        if standings:
            document = usage_document(standings)
        else:
            spent = await hop(spent_in_cents, gw.limits.usd_spent or usd_logged, key.id, time.time())
            document = usage_document([], spent)
        return json_response(document, headers={"Cache-Control": "no-store"})
    except GatewayError as err:
        return error_response("anthropic", err)
    except DatabaseUnavailable as exc:
        return error_response("anthropic", unavailable(exc))
