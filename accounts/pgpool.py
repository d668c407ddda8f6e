"""The account pool of a PostgreSQL deployment: one round trip per pick, on the event loop.

The pick is one call of ``accounts_pick_account`` (:data:`accounts.pickorder.PG_FUNCTION`),
which keeps least-recently-used exact across processes. Made through Django it
cost a worker-thread hop (a ``concurrent.futures`` future, a condition variable,
two GIL hand-overs) and a raw queryset per request: in the profile of one gateway
process on PostgreSQL at c=16, the pick and its hop were a fifth of the process's
Python time. Here it is one awaited query on a connection of this event loop.

A connection that fails is thrown away with the idle ones (the database
restarted: its old connections are all dead) and the pick is tried once more on
a new one. Past that the database is away: picks come from a stand-by memory
pool (:mod:`accounts.memorypool`, re-read every ``STANDBY_TTL`` seconds while the
database answers) for ``RETRY_DATABASE_AFTER`` seconds at a time, each process
rotating on its own, so requests that need nothing new from the database are
still served; :class:`accounts.db.DatabaseUnavailable` is raised only when no
copy was ever read.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

from django.db import connections
from django.utils import timezone

from .db import DatabaseUnavailable, hop
from .memorypool import MemoryPool
from .models import Account
from .pickorder import PG_ANY_USABLE
from .pool import RecordedInDatabase, end_cooldown

log = logging.getLogger(__name__)

CONNECTIONS = 4  # per event loop: picks are short; more would only queue inside PostgreSQL's lock
STANDBY_TTL = 5.0
RETRY_DATABASE_AFTER = 1.0  # while the database is away, one pick a second tries it (a connect attempt)

PICK = "SELECT * FROM accounts_pick_account(%s, %s::bigint[], %s, %s, %s::bigint)"


class PgPool(RecordedInDatabase):
    def __init__(self, connections: int = CONNECTIONS) -> None:
        self._size = connections
        self._pools: dict[int, tuple[asyncio.AbstractEventLoop, _Connections]] = {}
        self.standby = MemoryPool(STANDBY_TTL)
        self._away_until = 0.0

    def _connections(self) -> _Connections:
        loop = asyncio.get_running_loop()
        entry = self._pools.get(id(loop))
        if entry is None or entry[0] is not loop:
            # Connections of a loop that has ended can no longer be closed from here: let them go.
            self._pools = {k: v for k, v in self._pools.items() if not v[0].is_closed()}
            entry = self._pools[id(loop)] = (loop, _Connections(self._size))
        return entry[1]

    async def pick(self, provider_id: int, exclude: Sequence[int], strategy: str,
                   prefer: int | None = None) -> Account | None:
        if time.monotonic() < self._away_until:
            return await self.standby.pick(provider_id, exclude, strategy, prefer)
        now = timezone.now()
        try:
            account = await self._pick_twice(provider_id, list(exclude), strategy, now, prefer)
        except DatabaseUnavailable:
            self._away_until = time.monotonic() + RETRY_DATABASE_AFTER
            log.warning("pool database unreachable; picking from memory")
            return await self.standby.pick(provider_id, exclude, strategy, prefer)
        self.standby.keep_warm()
        if account is not None and account.status == Account.COOLING:
            await hop(end_cooldown, account, now)
        return account

    async def _pick_twice(self, provider_id: int, exclude: list[int], strategy: str,
                          now: dt.datetime, prefer: int | None) -> Account | None:
        try:
            return await self._pick(provider_id, exclude, strategy, now, prefer)
        except _ConnectionFailed as first:
            # One connection broke: the others, idle since, most likely did too (the database restarted).
            log.warning("pool pick failed (%s); trying a new connection", first.__cause__)
            await self._connections().discard_idle()
            try:
                return await self._pick(provider_id, exclude, strategy, now, prefer)
            except _ConnectionFailed as exc:
                raise DatabaseUnavailable(str(exc.__cause__)) from exc.__cause__

    async def _pick(self, provider_id: int, exclude: list[int], strategy: str, now: dt.datetime,
                    prefer: int | None) -> Account | None:
        pool = self._connections()
        try:
            conn = await pool.get()
        except Exception as exc:
            raise _ConnectionFailed from exc
        try:
            for _ in range(3):
                cur = await conn.execute(PICK, (provider_id, exclude, strategy, now, prefer))
                row = await cur.fetchone()
                if row is not None:
                    return _account(cur.description or (), row)
                # Empty: nothing usable, or the chosen account was disabled while this pick waited for it.
                cur = await conn.execute(PG_ANY_USABLE, (provider_id, exclude, now))
                usable = await cur.fetchone()
                if not (usable and usable[0]):
                    return None
            return None
        except BaseException as exc:
            await pool.discard(conn)
            conn = None
            if isinstance(exc, Exception):
                raise _ConnectionFailed from exc
            raise
        finally:
            if conn is not None:
                pool.put(conn)

    def on_state_change(self, sender: Any, account_id: int, status: str,
                        cooldown_until: dt.datetime | None = None, **kwargs: Any) -> None:
        """Picks read the database; the stand-by copy hears it."""

        self.standby.on_state_change(sender, account_id, status, cooldown_until)

    def invalidate(self, **kwargs: Any) -> None:
        self.standby.invalidate()

    def flush(self) -> None:
        """What the stand-by picked while the database was away (picks stamp the database themselves)."""

        self.standby.flush()

    async def aclose(self) -> None:
        """Close this event loop's connections (the gateway stopping, a test ending)."""

        entry = self._pools.pop(id(asyncio.get_running_loop()), None)
        if entry is not None:
            await entry[1].aclose()
        try:
            await self.standby.aclose()
        except DatabaseUnavailable:
            log.warning("stand-by pool stamps not written: the database is unreachable")


class _ConnectionFailed(Exception):
    pass


class _Connections:
    """At most ``size`` connections; a caller waits for one handed back (or for a free slot)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._idle: list[Any] = []
        self._open = 0
        self._waiters: deque[asyncio.Future[Any]] = deque()

    async def get(self) -> Any:
        if self._idle:
            return self._idle.pop()
        if self._open >= self._size:
            waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                conn = await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self.put(waiter.result())  # handed over just as we were cancelled: pass it on
                raise
            if conn is not None:
                return conn
            # None: a connection was thrown away, and its slot is ours to open again.
        else:
            self._open += 1
        try:
            return await _connect()
        except BaseException:
            self._free_slot()
            raise

    def put(self, conn: Any) -> None:
        if not self._hand_over(conn):
            self._idle.append(conn)

    async def discard(self, conn: Any) -> None:
        self._free_slot()
        try:
            await conn.close()
        except Exception:  # noqa: BLE001 - it is being thrown away because it failed
            pass

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()
        self._open -= len(idle)

    async def discard_idle(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            await self.discard(conn)

    def _free_slot(self) -> None:
        self._open -= 1
        if self._hand_over(None):
            self._open += 1  # the waiter that got the slot opens a connection in it

    def _hand_over(self, conn: Any) -> bool:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return True
        return False


def _account(description: Any, row: tuple[Any, ...]) -> Account:
    # The table's column order is not the model's (later migrations append columns): map by name.
    at = {column.name: i for i, column in enumerate(description)}
    fields = Account._meta.concrete_fields
    return Account.from_db("default", [f.attname for f in fields], [row[at[f.column]] for f in fields])


async def _connect() -> Any:
    import psycopg

    params = connections["default"].get_connection_params()
    for django_only in ("cursor_factory", "context"):
        params.pop(django_only, None)
    params.setdefault("connect_timeout", 5)  # a database that is down must not hold a pick for minutes
    conn = await psycopg.AsyncConnection.connect(**params, autocommit=True)
    await conn.execute("SET TIME ZONE 'UTC'")
    return conn


async def own_connection() -> Any:
    """A connection for a caller of its own (``gateway.configwatch``'s LISTEN), opened as the pool's are."""

    return await _connect()
