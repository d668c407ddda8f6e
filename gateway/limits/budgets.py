"""What a key may spend per period, and what the request log says it has spent.

A :class:`Budget` is one such limit: a unit (tokens, or USD counted in
micro-dollars, so that every amount is an integer Redis can ``INCRBY``), a
limit, a :class:`Period`, how a finished request is measured in that unit, and
how the log is summed for a key since a time. Budgets are counted in fixed
periods that every process computes alike from the clock (the UTC day, a 5-hour
block since the epoch, the ISO week, the calendar month), so the period's start
names its counters: a sliding window could not be one counter.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import DatabaseError

from accounts.db import DatabaseUnavailable, hop
from accounts.prices import dollars, micro_dollars

from ..logrecord import LogRecord, request_cost
from ..state import KeyInfo

log = logging.getLogger(__name__)

UTC = dt.timezone.utc
USD = "usd"  # a budget's unit: amounts in micro-dollars


@dataclass(frozen=True)
class Period:
    name: str  # in counter names, and ``KeyInfo.usd_budgets``
    phrase: str  # in messages: "its 40 tokens for <phrase>"
    adjective: str  # in messages: "the <adjective> USD budget"
    bounds: Callable[[dt.datetime], tuple[dt.datetime, dt.datetime]]


def _day(now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    start = dt.datetime.combine(now.astimezone(UTC).date(), dt.time(), tzinfo=UTC)
    return start, start + dt.timedelta(days=1)


def _five_hours(now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    block = 5 * 3600
    start = dt.datetime.fromtimestamp(int(now.timestamp()) // block * block, UTC)
    return start, start + dt.timedelta(seconds=block)


def _week(now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    day, _ = _day(now)
    start = day - dt.timedelta(days=day.weekday())
    return start, start + dt.timedelta(days=7)


def _month(now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    day, _ = _day(now)
    start = day.replace(day=1)
    return start, (start + dt.timedelta(days=32)).replace(day=1)


DAY = Period("day", "today (UTC)", "daily", _day)
FIVE_HOURS = Period("5h", "this 5-hour block (UTC)", "5-hour", _five_hours)
WEEK = Period("week", "this week (UTC, from Monday)", "weekly", _week)
MONTH = Period("month", "this month (UTC)", "monthly", _month)
PERIODS = {p.name: p for p in (FIVE_HOURS, DAY, WEEK, MONTH)}


@dataclass(frozen=True)
class Budget:
    unit: str  # "tokens"; in counter names and messages
    limit: int
    period: Period
    measure: Callable[[LogRecord], int]  # what a finished request spent, in the unit
    logged: Callable[[int, dt.datetime], int]  # sync: what the log shows key id spent since a time

    def scope(self, key: KeyInfo, start: dt.datetime) -> str:
        return f"{self.unit}:{self.period.name}:{int(start.timestamp())}:{key.id}:{key.name}"

    def amount(self, n: int) -> str:
        """``n`` in the budget's unit, as a message shows it: "40 tokens", "$5.00"."""

        return dollars(n) if self.unit == USD else f"{n} {self.unit}"


def tokens_of(record: LogRecord) -> int:
    return record.input_tokens + record.output_tokens


def tokens_logged(key_id: int, since: dt.datetime) -> int:
    from django.db.models import F, Sum

    from accounts.models import RequestLog

    total = RequestLog.objects.filter(client_key_id=key_id, created_at__gte=since).aggregate(
        used=Sum(F("input_tokens") + F("output_tokens")))["used"]
    return int(total or 0)


# What a key spent in USD since a time (sync): the request log's sum by default, or a rollup's.
UsdSpent = Callable[[int, dt.datetime], Decimal]


def usd_logged(key_id: int, since: dt.datetime) -> Decimal:
    from django.db.models import Sum

    from accounts.models import RequestLog

    total = RequestLog.objects.filter(client_key_id=key_id, created_at__gte=since).aggregate(
        spent=Sum("cost"))["spent"]
    return total or Decimal(0)


def in_micro_dollars(spent: UsdSpent) -> Callable[[int, dt.datetime], int]:
    def logged(key_id: int, since: dt.datetime) -> int:
        return micro_dollars(spent(key_id, since))

    return logged


def usd_of(prices: dict[str, Any] | None) -> Callable[[LogRecord], int]:
    """What a finished request cost in micro-dollars, by the price table of the provider it was sent to."""

    def measure(record: LogRecord) -> int:
        spent = request_cost(record, prices)
        return micro_dollars(spent) if spent else 0

    return measure


def budgets_of(key: KeyInfo, prices: dict[str, Any] | None = None, spent: UsdSpent | None = None) -> list[Budget]:
    """The key's budgets: the daily token limit, then its USD budgets (``prices``: the route's provider's;
    ``spent``: where the floor of what the key spent is read, the request log by default)."""

    budgets = []
    if key.daily_token_limit is not None:
        budgets.append(Budget("tokens", key.daily_token_limit, DAY, tokens_of, tokens_logged))
    if key.usd_budgets:
        measure, logged = usd_of(prices), in_micro_dollars(spent or usd_logged)
        for period, limit in key.usd_budgets:
            budgets.append(Budget(USD, limit, PERIODS[period], measure, logged))
    return budgets


class LogUsage:
    """What the log shows a key spent in a period, re-read at most every ``ttl`` seconds.

    Only a floor for the counters (``gateway.limits.store``): the log is written a
    batch later than requests end, which is why it alone let a burst through.
    """

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._cache: dict[tuple[str, int, dt.datetime], tuple[float, int]] = {}

    async def since(self, budget: Budget, key_id: int, start: dt.datetime) -> int:
        ident = (budget.unit, key_id, start)
        now = self._clock()
        cached = self._cache.get(ident)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            used = await hop(budget.logged, key_id, start)
        except (DatabaseError, DatabaseUnavailable) as exc:
            # The counters still hold what this process and Redis saw; the database's outage is
            # answered where a request needs the database (the account pick), not here.
            log.warning("request log unreadable for a key's %s (%s); using the last figure",
                        budget.unit, type(exc).__name__)
            return cached[1] if cached is not None else 0
        if len(self._cache) > 10_000:
            self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
        self._cache[ident] = (now + self._ttl, used)
        return used
