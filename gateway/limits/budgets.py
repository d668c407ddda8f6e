"""What a key or a team may spend in a rolling window, and what the request log says it has spent there.

A :class:`Budget` is one such limit: a unit (tokens, or USD counted in
micro-dollars, so that every amount is an integer Redis can ``HINCRBY``), a
limit, a rolling :class:`accounts.budgetwindows.Window` (the last 5 hours, 24 hours, 7 days,
30 days, each up to one slice longer), how a finished request is measured in
that unit, whose spending it counts (its :class:`~accounts.budgetwindows.Subject`: the
caller's key, or the key's team, whose spending is that of all its keys), and how the log is
read for that subject: what it spent per slice since a time. One mechanism for all of them, the
daily token limit and a team's USD budgets included: a team's budget is reserved and charged
under the team's own counters, which every key of the team (on every process, through Redis)
adds to.
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

from accounts.budgetwindows import DAY, KEY, TEAM, WINDOWS, Subject, Window
from accounts.db import DatabaseUnavailable, hop
from accounts.prices import dollars, micro_dollars

from ..log.record import LogRecord, request_cost
from ..state import KeyInfo

log = logging.getLogger(__name__)

UTC = dt.timezone.utc
USD = "usd"  # a budget's unit: amounts in micro-dollars

# What a subject spent per slice since a time: (subject, since, slice width) → slice start → amount (sync).
Logged = Callable[[Subject, dt.datetime, int], dict[int, int]]


@dataclass(frozen=True)
class Budget:
    unit: str  # "tokens"; in counter names and messages
    limit: int
    window: Window
    measure: Callable[[LogRecord], int]  # what a finished request spent, in the unit
    logged: Logged  # what the log shows the subject spent per slice
    subject: Subject  # whose spending it counts: the caller's key, or its team

    @property
    def pool(self) -> bool:
        """A budget a whole team shares: its refusal says so (``gateway.limits.standing``), and it
        counts apart from the key's own."""

        return self.subject.kind == TEAM

    def scope(self) -> str:
        """The counters' name, the same on every process (a key's as it always was)."""

        s = self.subject
        return f"{'team:' if self.pool else ''}{self.unit}:{self.window.name}:{s.id}:{s.name}"

    def amount(self, n: int) -> str:
        """``n`` in the budget's unit, as a message shows it: "40 tokens", "$5.00"."""

        return dollars(n) if self.unit == USD else f"{n} {self.unit}"


def tokens_of(record: LogRecord) -> int:
    return record.input_tokens + record.output_tokens


def by_slice(rows: Any, width: int) -> dict[Any, Any]:
    """(time, amount) rows summed per slice of ``width`` seconds."""

    slices: dict[Any, Any] = {}
    for at, amount in rows:
        start = int(at.timestamp()) // width * width
        slices[start] = slices.get(start, 0) + (amount or 0)
    return slices


def _log_by_slice(subject: Subject, since: dt.datetime, width: int, amount: Any) -> dict[Any, Any]:
    """The request log's ``amount`` per slice: summed by the database per minute or hour (``Trunc*`` works
    on SQLite and PostgreSQL alike, and the (client key, created_at) index finds the rows), folded into
    slices here: a month's window is 720 hourly rows, not every request of 30 days."""

    from django.db.models import Sum
    from django.db.models.functions import TruncHour, TruncMinute

    from accounts.models import RequestLog, client_key_ids

    trunc = TruncHour if width % 3600 == 0 else TruncMinute
    rows = (RequestLog.objects.filter(client_key_id__in=client_key_ids(subject), created_at__gte=since)
            .annotate(at=trunc("created_at", tzinfo=UTC)).values("at").annotate(spent=Sum(amount))
            .values_list("at", "spent"))
    return by_slice(rows, width)


def tokens_logged(subject: Subject, since: dt.datetime, width: int) -> dict[int, int]:
    from django.db.models import F

    return {start: int(n) for start, n in _log_by_slice(subject, since, width,
                                                         F("input_tokens") + F("output_tokens")).items()}


# What a subject spent in USD per slice since a time (sync): the request log's by default, or a rollup's.
UsdSpent = Callable[[Subject, dt.datetime, int], dict[int, Decimal]]


def usd_logged(subject: Subject, since: dt.datetime, width: int) -> dict[int, Decimal]:
    return {start: Decimal(n) for start, n in _log_by_slice(subject, since, width, "cost").items()}


def in_micro_dollars(spent: UsdSpent) -> Logged:
    def logged(subject: Subject, since: dt.datetime, width: int) -> dict[int, int]:
        return {start: micro_dollars(usd) for start, usd in spent(subject, since, width).items()}

    return logged


def usd_of(prices: dict[str, Any] | None) -> Callable[[LogRecord], int]:
    """What a finished request cost in micro-dollars, by the price table of the provider it was sent to."""

    def measure(record: LogRecord) -> int:
        spent = request_cost(record, prices)
        return micro_dollars(spent) if spent else 0

    return measure


# A caller's budgets: (key, the route's prices, where USD spending is read) → budgets (``budgets_of``).
BudgetsOf = Callable[[KeyInfo, dict[str, Any] | None, UsdSpent | None], list[Budget]]


def budgets_of(key: KeyInfo, prices: dict[str, Any] | None = None, spent: UsdSpent | None = None) -> list[Budget]:
    """The caller's budgets: the key's daily token limit (a rolling 24 hours), its USD budgets, then its
    team's USD budgets, which all of the team's keys spend together (``prices``: the route's provider's;
    ``spent``: where the floor of what was spent is read, the request log by default)."""

    budgets = []
    own = Subject(KEY, key.id, key.name)
    if key.daily_token_limit is not None:
        budgets.append(Budget("tokens", key.daily_token_limit, DAY, tokens_of, tokens_logged, own))
    team = key.team
    if key.usd_budgets or (team is not None and team.usd_budgets):
        measure, logged = usd_of(prices), in_micro_dollars(spent or usd_logged)
        for window, limit in key.usd_budgets:
            budgets.append(Budget(USD, limit, WINDOWS[window], measure, logged, own))
        if team is not None:
            shared = Subject(TEAM, team.id, team.name)
            for window, limit in team.usd_budgets:
                budgets.append(Budget(USD, limit, WINDOWS[window], measure, logged, shared))
    return budgets


class LogUsage:
    """What the log shows a budget's subject spent per slice of a window, re-read at most every ``ttl`` seconds.

    Only a floor for the counters (``gateway.limits.store``): the log is written a
    batch later than requests end, which is why it alone let a burst through.
    """

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._cache: dict[tuple[str, str, Subject, int], tuple[float, dict[int, int]]] = {}

    async def since(self, budget: Budget, start: int) -> dict[int, int]:
        """Per slice from the slice starting at ``start`` (Unix seconds)."""

        ident = (budget.unit, budget.window.name, budget.subject, start)
        now = self._clock()
        cached = self._cache.get(ident)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            used = await hop(budget.logged, budget.subject, dt.datetime.fromtimestamp(start, UTC), budget.window.width)
        except (DatabaseError, DatabaseUnavailable) as exc:
            # The counters still hold what this process and Redis saw; the database's outage is
            # answered where a request needs the database (the account pick), not here.
            log.warning("request log unreadable for a %s's %s (%s); using the last figure",
                        budget.subject.kind, budget.unit, type(exc).__name__)
            return cached[1] if cached is not None else {}
        if len(self._cache) > 10_000:
            self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
        self._cache[ident] = (now + self._ttl, used)
        return used
