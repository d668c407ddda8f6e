"""The cost report of the organization admin API (``GET /v1/organizations/analytics/cost``, in the
shape of Anthropic's), read from the request log.

Parameters: ``starting_at`` (required) and ``ending_at`` (default now; at most 31 days after the
start), RFC 3339 times; ``time_bucket_width=1d`` for one row per UTC day (without it, one row for
the whole range); ``group_by[]`` ``actor`` (the developer, or the client key for a key that stands
for nobody) and/or ``rbac_group_id`` (the team); ``actor_ids[]`` and ``rbac_group_ids[]`` to filter
(usernames, team names); ``limit`` (1–1000, default 20) and ``page`` (the ``next_page`` of the
previous answer); ``order`` asc/desc by amount (default desc). Amounts are US cents as decimal
strings, as Anthropic's report writes them. Synchronous ORM code, called through ``accounts.db.hop``.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import orjson
from django.db.models import Count, Sum
from django.db.models.functions import TruncDate

from .models import RequestLog
from .spendlimits import SpendLimitError

UTC = dt.timezone.utc
MAX_DAYS = 31
PARAMS = ("starting_at", "ending_at", "time_bucket_width", "group_by[]", "actor_ids[]", "rbac_group_ids[]",
          "limit", "page", "order")


def _time(value: str, name: str) -> dt.datetime:
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise SpendLimitError(400, f"{name}: must be an RFC 3339 time, e.g. 2026-11-01T00:00:00Z") from None
    if when.tzinfo is None:
        raise SpendLimitError(400, f"{name}: must name its time zone (Z for UTC)")
    return when.astimezone(UTC)


def _cents(usd: Decimal | None) -> str:
    return f"{((usd or Decimal(0)) * 100).quantize(Decimal('0.001')).normalize():f}"


def cost_report(query: Mapping[str, Sequence[str]], now: dt.datetime) -> dict[str, Any]:
    """``query``: each parameter's values (``QueryDict.lists()``)."""

    for name in query:
        if name not in PARAMS and name != "beta":
            raise SpendLimitError(400, f"{name[:50]}: not a parameter of the cost report, which takes "
                                       f"{', '.join(PARAMS)}")

    def one(name: str) -> str | None:
        values = query.get(name)
        return values[-1] if values else None

    start_text = one("starting_at")
    if start_text is None:
        raise SpendLimitError(400, "starting_at: required")
    start = _time(start_text, "starting_at")
    end_text = one("ending_at")
    end = _time(end_text, "ending_at") if end_text is not None else min(now, start + dt.timedelta(days=MAX_DAYS))
    if start >= end:
        raise SpendLimitError(400, "starting_at: must be before ending_at, which defaults to now")
    if end - start > dt.timedelta(days=MAX_DAYS):
        raise SpendLimitError(400, f"ending_at: the range may span at most {MAX_DAYS} days")
    width = one("time_bucket_width")
    if width not in (None, "1d"):
        raise SpendLimitError(400, "time_bucket_width: must be 1d")
    group_by = list(query.get("group_by[]", []))
    if any(g not in ("actor", "rbac_group_id") for g in group_by):
        raise SpendLimitError(400, "group_by[]: must be actor or rbac_group_id")
    try:
        limit = int(one("limit") or 20)
    except ValueError:
        limit = 0
    if not 1 <= limit <= 1000:
        raise SpendLimitError(400, "limit: must be between 1 and 1000")
    order = one("order") or "desc"
    if order not in ("asc", "desc"):
        raise SpendLimitError(400, "order: must be asc or desc")
    actors, groups = list(query.get("actor_ids[]", [])), list(query.get("rbac_group_ids[]", []))
    if len(actors) > 100 or len(groups) > 100:
        raise SpendLimitError(400, "actor_ids[] and rbac_group_ids[]: at most 100 entries each")

    rows = RequestLog.objects.filter(created_at__gte=start, created_at__lt=end, cost__isnull=False)
    if actors:
        rows = rows.filter(client_key__user__username__in=actors)
    if groups:
        rows = rows.filter(client_key__team__name__in=groups)
    fields: list[str] = []
    if width is not None:
        rows = rows.annotate(day=TruncDate("created_at", tzinfo=UTC))
        fields.append("day")
    if "actor" in group_by:
        fields += ["client_key_id", "client_key__name", "client_key__user__username", "client_key__user__email"]
    if "rbac_group_id" in group_by:
        fields.append("client_key__team__name")
    summed = list(rows.values(*fields).annotate(amount=Sum("cost"), requests=Count("id")))
    summed.sort(key=lambda r: (r["amount"] or Decimal(0), str(r.get("client_key_id")), str(r.get("day"))),
                reverse=order == "desc")

    digest = hashlib.sha256(orjson.dumps(sorted((k, list(v)) for k, v in query.items()
                                                if k not in ("page", "limit")))).hexdigest()[:16]
    offset = _offset(one("page"), digest)
    page = summed[offset:offset + limit]
    more = len(summed) > offset + limit
    next_page = (base64.urlsafe_b64encode(orjson.dumps({"o": offset + limit, "q": digest})).decode()
                 if more else None)
    return {"data": [_row(r, start, end, width is not None, "actor" in group_by) for r in page],
            "has_more": more, "next_page": next_page, "data_refreshed_at": now.strftime("%Y-%m-%dT%H:%M:%SZ")}


def _offset(token: str | None, digest: str) -> int:
    if token is None:
        return 0
    try:
        decoded = orjson.loads(base64.urlsafe_b64decode(token.encode()))
        if decoded["q"] == digest and isinstance(decoded["o"], int) and decoded["o"] >= 0:
            return int(decoded["o"])
    except (ValueError, KeyError, TypeError):
        pass
    raise SpendLimitError(400, "page: invalid page token, or one from a request with other parameters")


def _row(r: Mapping[str, Any], start: dt.datetime, end: dt.datetime, daily: bool, by_actor: bool) -> dict[str, Any]:
    if daily:
        day = r["day"]
        begins = dt.datetime(day.year, day.month, day.day, tzinfo=UTC)
        starting, ending = begins, begins + dt.timedelta(days=1)
    else:
        starting, ending = start, end
    actor = None
    api_key = None
    if by_actor:
        if r.get("client_key__user__username"):
            actor = {"type": "user_actor", "user_id": r["client_key__user__username"],
                     "email_address": r.get("client_key__user__email") or None, "name": None, "deleted": False}
        else:
            api_key = r.get("client_key__name") or None
    return {"starting_at": starting.strftime("%Y-%m-%dT%H:%M:%SZ"), "ending_at": ending.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "group": {"actor": actor, "api_key_id": api_key, "rbac_group_id": r.get("client_key__team__name")},
            "cost": {"currency": "USD", "amount": _cents(r["amount"]), "list_amount": _cents(r["amount"]),
                     "requests": r["requests"]}}
