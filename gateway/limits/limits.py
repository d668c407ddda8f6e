"""The app's limits: what a client key may ask for, how often, how much and how many at once.

Checked in this order, each refused with 429 in the caller's envelope, a
``Retry-After`` and a message naming the limit:

1. requests per minute (``check_rate``, before the body is read): fixed
   one-minute windows; a window boundary can let up to twice the limit through in
   a short burst, the price of one round trip per request;
2. concurrent requests (``admit``): a slot leased for the request's lifetime;
3. budgets (``admit``): each reserves an estimate of what the request will
   spend (``estimate.py``) before it is sent, and it is refused while what
   finished requests spent in the budget's rolling window (``accounts.budgetwindows``) plus
   what is reserved in flight has reached the limit. The request that crosses
   the limit is served, so a burst overshoots by at most one request's
   reservation, not by everything in flight. Refused because spent, the message
   says when enough of the oldest spending leaves the window.

What ``admit`` grants is a :class:`Hold`, settled once when the request ends,
whichever way it ends: ``api_call`` settles it for a JSON answer or an error,
the stream writer when its stream ends (finished, failed or abandoned by the
client). Settling gives the slot and the reservations back and charges each
budget what the request's log record shows it spent, in the slice of the time
it was admitted (its log row's time, give or take a millisecond: the slice the
log's floor counts it in).

With ``REDIS_URL`` the counts live in Redis (``store.RedisStore``) and every
gateway process shares them; a lease that a crashed process never gave back
lapses after ``LEASE_SECONDS``, and this process renews the leases of its live
requests every third of that. Without Redis, or while the breaker
(``breaker.py``) keeps Redis out, they live in this process.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import OverBudget, RateLimited, TooManyInFlight, TooManySockets
from ..state import KeyInfo
from .breaker import Breaker
from .budgets import USD, Budget, BudgetsOf, LogUsage, UsdSpent, budgets_of
from .standing import DEFAULT_HELP, Standing, refusal, standing_of
from .store import Granted, LocalStore, RedisStore, SharedUnavailable, Store

if TYPE_CHECKING:
    from ..log.record import LogRecord

T = TypeVar("T")

WINDOW_SECONDS = 60
# How long a slot or a reservation outlives a process that died holding it.
LEASE_SECONDS = 30.0


@dataclass(frozen=True)
class Lease:
    store: Store  # where it was granted, and so where it is given back
    scope: str
    member: str
    budget: Budget | None  # None: a concurrency slot
    at: int = 0  # a reservation: the slice it is charged to (its admission's)


class Hold:
    """What one admitted request holds against its key's limits until it ends."""

    def __init__(self, limits: Limits, request_id: str) -> None:
        self.request_id = request_id
        self.leases: list[Lease] = []
        # The key's standing against each of its USD budgets at admission (gateway.limits.standing).
        self.standings: list[Standing] = []
        self.loop = asyncio.get_running_loop()
        self._limits = limits
        self._settled = False

    def settle(self, record: LogRecord | None = None) -> None:
        """The request has ended: give everything back, charging each budget what ``record`` shows
        was spent (nothing without one). Once; from any thread (a collected stream settles from the
        garbage collector's)."""

        if self._settled:
            return
        self._settled = True
        if self.leases:
            self._limits.give_back(self, record)


class Limits:
    def __init__(self, redis_url: str = "", token_usage_ttl: float = 5.0, *,
                 reserve_output_tokens: int = 4096, lease: float = LEASE_SECONDS,
                 breaker: Breaker | None = None, clock: Callable[[], float] = time.time,
                 usd_spent: UsdSpent | None = None, budgets: BudgetsOf = budgets_of,
                 budget_help: str = DEFAULT_HELP) -> None:
        """``usd_spent``: what a key spent in USD per slice since a time (sync), the floor under its USD
        budgets; None reads the request log. ``clock``: Unix seconds, the clock the request log is
        stamped by (slices are named by it). ``budgets``: a caller's budgets (its key's and its team's,
        ``budgets.budgets_of``). ``budget_help``: what a refusal at a spent USD budget
        tells the caller to do (``GATEWAY_BUDGET_HELP``)."""

        self.local = LocalStore()
        self.shared = RedisStore(redis_url, breaker) if redis_url else None
        self.usage = LogUsage(token_usage_ttl)
        self.usd_spent = usd_spent
        self.budgets = budgets
        self.budget_help = budget_help
        self.reserve_output_tokens = reserve_output_tokens
        self.lease = lease
        self._clock = clock
        # Weakly held: a hold dropped without being settled (a bug) stops being renewed and lapses.
        self._live: weakref.WeakSet[Hold] = weakref.WeakSet()
        self._tasks: set[asyncio.Task[None]] = set()
        # Told (key, budget, the refusal's event identity) when a budget refuses a request: the app's
        # alerts. It must not wait: it runs on the request path.
        self.budget_refused: Callable[[KeyInfo, Budget, str], None] = lambda key, budget, scope: None

    async def _on(self, op: Callable[[Store], Awaitable[T]]) -> tuple[Store, T]:
        """``op`` on Redis when it can be asked, else on this process's store."""

        if self.shared is not None:
            try:
                return self.shared, await op(self.shared)
            except SharedUnavailable:
                pass
        return self.local, await op(self.local)

    async def hits(self, name: str, seconds: int) -> int:
        """Count one more in the fixed window of ``seconds`` now falls in, named ``name``; returns the count."""

        window = int(self._clock() // seconds)
        _, count = await self._on(lambda store: store.hit(f"{name}:{window}", 2 * seconds))
        return count

    async def check_rate(self, key: KeyInfo) -> None:
        """Count a request against the key's requests per minute; raise :class:`RateLimited` over it."""

        limit = key.rate_limit_per_minute
        if limit is None:
            return
        now = self._clock()
        window = int(now // WINDOW_SECONDS)
        name = f"{key.id}:{key.name}:{window}"
        _, count = await self._on(lambda store: store.hit(name, 2 * WINDOW_SECONDS))
        if count > limit:
            retry_after = max(1, math.ceil((window + 1) * WINDOW_SECONDS - now))
            raise RateLimited(f"This API key is limited to {limit} requests per minute",
                              headers={"Retry-After": str(retry_after)})

    async def admit(self, key: KeyInfo, request_id: str, estimate: Callable[[Budget], int],
                    prices: dict[str, Any] | None = None) -> Hold:
        """A concurrency slot and a reservation on each budget for the request, or :class:`RateLimited`.

        ``estimate``: what the request may spend of a budget, asked only when the key has one.
        ``prices``: the price table of the provider the request goes to, which its USD budgets charge by.
        """

        hold = Hold(self, request_id)
        cap = key.max_concurrent_requests
        budgets = self.budgets(key, prices, self.usd_spent)
        if cap is None and not budgets:
            return hold
        try:
            if cap is not None:
                await self._take_slot(hold, key, cap)
            now = self._clock()
            refused: tuple[Budget, Granted] | None = None
            for budget in budgets:
                if refused is None:
                    granted = await self._reserve(hold, budget, estimate(budget), now)
                    if not granted.ok:
                        refused = budget, granted
                elif budget.unit == USD:  # past a refusal, the other caps only looked at: which frees last
                    granted = await self._look(budget, now)
                else:
                    continue
                if budget.unit == USD:
                    hold.standings.append(standing_of(budget, granted, now))
            if refused is not None:
                budget, granted = refused
                self.budget_refused(key, budget, refusal_event(budget.scope(), budget.window.seconds, now))
                if budget.unit == USD and granted.used >= budget.limit:
                    raise refusal(hold.standings, now, self.budget_help)
                raise over_budget(budget, granted, now)
        except BaseException:
            hold.settle()
            raise
        self._live.add(hold)
        return hold

    async def standings(self, key: KeyInfo) -> list[Standing]:
        """``key``'s standing against each of its (and its team's) USD budgets now, reserving nothing
        (``/api/oauth/usage``)."""

        now = self._clock()
        return [standing_of(budget, await self._look(budget, now), now)
                for budget in self.budgets(key, None, self.usd_spent) if budget.unit == USD]
    async def open_socket(self, key: KeyInfo, socket_id: str, cap: int) -> Hold:
        """A slot among the key's open websockets (at most ``cap``), held until the socket closes
        (settle the hold), or :class:`TooManySockets`. Shared like the concurrency slots."""

        hold = Hold(self, socket_id)
        scope = f"sockets:{key.id}:{key.name}"
        store, granted = await self._on(lambda s: s.take(scope, socket_id, cap, self.lease))
        if not granted.ok:
            raise TooManySockets(f"This API key is limited to {cap} open websockets and has {granted.held} open; "
                                 "close one before opening another", headers={"Retry-After": "1"})
        hold.leases.append(Lease(store, scope, socket_id, None))
        self._live.add(hold)
        return hold

    async def _take_slot(self, hold: Hold, key: KeyInfo, cap: int) -> None:
        scope = f"conc:{key.id}:{key.name}"
        store, granted = await self._on(lambda s: s.take(scope, hold.request_id, cap, self.lease))
        if not granted.ok:
            raise TooManyInFlight(f"This API key is limited to {cap} concurrent requests and has {granted.held} "
                              "in flight; retry when one finishes", headers={"Retry-After": "1"})
        hold.leases.append(Lease(store, scope, hold.request_id, None))

    async def _reserve(self, hold: Hold, budget: Budget, amount: int, now: float) -> Granted:
        window = budget.window
        since = window.first(now)
        logged = await self.usage.since(budget, since)
        scope = budget.scope()
        member = f"{hold.request_id}:{amount}"
        store, granted = await self._on(
            lambda s: s.reserve(scope, member, amount, budget.limit, logged, since, window.keep, self.lease))
        if granted.ok:
            hold.leases.append(Lease(store, scope, member, budget, window.slice_of(now)))
        return granted

    async def _look(self, budget: Budget, now: float) -> Granted:
        window = budget.window
        since = window.first(now)
        logged = await self.usage.since(budget, since)
        scope = budget.scope()
        _, granted = await self._on(lambda s: s.look(scope, budget.limit, logged, since, window.keep))
        return granted

    def give_back(self, hold: Hold, record: LogRecord | None) -> None:
        """Return ``hold``'s leases, on its loop (from whichever thread ends the request)."""

        def start() -> None:
            self._live.discard(hold)
            task = hold.loop.create_task(self._return(hold, record))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        try:
            on_loop = asyncio.get_running_loop() is hold.loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            start()
            return
        try:
            hold.loop.call_soon_threadsafe(start)
        except RuntimeError:
            pass  # the loop is closed: the process is ending, and with it what it held

    async def _return(self, hold: Hold, record: LogRecord | None) -> None:
        for lease in hold.leases:
            budget = lease.budget
            spent = budget.measure(record) if budget is not None and record is not None else 0
            keep = budget.window.keep if budget is not None else 0
            try:
                await lease.store.give_back(lease.scope, lease.member, spent, lease.at, keep)
            except SharedUnavailable:
                pass  # Redis is out of reach: the lease lapses there by itself, and the log has the spend

    async def renew(self) -> None:
        """Extend the leases of this process's live requests (and let the local store tidy up)."""

        shared: list[tuple[str, str]] = []
        local: list[tuple[str, str]] = []
        for hold in list(self._live):
            for lease in hold.leases:
                (local if lease.store is self.local else shared).append((lease.scope, lease.member))
        await self.local.renew(local, self.lease)
        if self.shared is not None and shared:
            try:
                await self.shared.renew(shared, self.lease)
            except SharedUnavailable:
                pass  # the leases may lapse: this process's requests then count for less, not more

    async def run(self) -> None:
        """The renewal beat, for as long as the app runs."""

        while True:
            await asyncio.sleep(self.lease / 3)
            await self.renew()

    async def aclose(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.shared is not None:
            await self.shared.aclose()


def refusal_event(scope: str, window: int, now: float) -> str:
    """A refusal's identity for the alerts (sent once per identity): the budget and the window-length
    block since the epoch it happened in, so a key held at its budget is reported at most once per
    window's length, as it was once per period when budgets were fixed periods."""

    return f"{scope}:{int(now // window)}"


def over_budget(budget: Budget, granted: Granted, now: float) -> OverBudget:
    """The refusal of a token budget, or of a USD budget filled by reservations in flight."""

    limit, window = budget.amount(budget.limit), budget.window
    if granted.used >= budget.limit:
        if granted.freeing is None:  # a limit of 0: nothing leaving the window frees it
            frees_at, when = now + window.seconds, "when the limit is raised"
        else:
            frees_at = window.out_at(granted.freeing)
            when = f"at {dt.datetime.fromtimestamp(frees_at, dt.timezone.utc):%Y-%m-%d %H:%M} UTC"
        retry = {"Retry-After": str(max(1, math.ceil(frees_at - now)))}
        # (A spent USD budget is refused by gateway.limits.standing.refusal, in Claude Code's words.)
        return OverBudget(f"This API key has used its {limit} in {window.phrase}; the limit frees {when}",
                          headers=retry)
    # Not spent yet but reserved by requests in flight: what they do not use comes back when they end.
    if budget.unit == USD:
        whose = "your team's keys" if budget.pool else "this key"
        return OverBudget(f"The {window.adjective} USD budget of {limit} for {whose} is taken: "
                          f"{budget.amount(granted.used)} used and {budget.amount(granted.held)} reserved by "
                          "requests in flight; retry when they finish", headers={"Retry-After": "1"})
    return OverBudget(f"This API key's limit of {limit} in {window.phrase} is taken: {granted.used} used and "
                      f"{granted.held} reserved by requests in flight; retry when they finish",
                      headers={"Retry-After": "1"})
