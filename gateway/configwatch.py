"""How a gateway process learns that its copy of the configuration is old (``accounts.configversion``).

Every change to what the gateways cache bumps one version row in the change's own transaction.
The configuration cache (``gateway.state``) compares that version with the one its copy was read
at, and a request that finds its copy older waits for a fresh one, so a revoked key is refused by
the first request after the revocation commits. How the version is learnt depends on the database:

- SQLite (one gateway process, other processes such as ``loadconfig`` or a second admin beside
  it): each request reads the row on a connection of the event loop's own (about 5 µs, no worker
  thread: in WAL mode a reader never waits for a writer; a read that would wait is skipped).
- PostgreSQL (N processes): a listener (``LISTEN gateway_config``) hears each change as its
  transaction commits (the process that made it knows even sooner: ``config_changed``), and the
  row is read again at most every ``interval`` seconds, awaited by the request that finds it due,
  so that a notification that never came (a listener connection that broke unnoticed) keeps an old
  copy in use for that long at most, never for the cache's TTL.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from accounts import configversion
from accounts.db import LoopSqlite, hop

log = logging.getLogger(__name__)

LISTEN_RETRY = 1.0  # seconds between attempts to listen again after the listener's connection failed
SILENCE_PROBE = 30.0  # a silent listener checks its connection this often
CHECK_WAIT = 0.5  # a request waits this long at most for a due read of the version, then goes on


class Watch(Protocol):
    async def latest(self) -> tuple[int, float] | None:
        """The version last read (now, when due) and the monotonic time its read began; None when
        it cannot be told. The version is compared, not ordered: a database restored (or a test's
        tables emptied) starts it again from 1."""

    async def listen(self, changed: Callable[[], None]) -> None:
        """Until cancelled: ``changed()`` for each change heard of (nothing to hear: return)."""


class SqliteVersion:
    """The version row read on every call, on a connection of the caller's (the event loop's) thread."""

    def __init__(self, db: LoopSqlite) -> None:
        self._db = db

    async def latest(self) -> tuple[int, float] | None:
        at = time.monotonic()
        version = self.read()
        return None if version is None else (version, at)

    def read(self) -> int | None:
        rows = self._db.rows(f"SELECT version FROM {configversion.TABLE} WHERE id = 1")
        if rows is None:
            return None
        return int(rows[0][0]) if rows else 0

    async def listen(self, changed: Callable[[], None]) -> None:
        return None

    def close(self) -> None:
        self._db.close()


class PgVersion:
    """LISTEN for changes; the version row read at most every ``interval`` seconds besides."""

    def __init__(self, interval: float, connect: Callable[[], Awaitable[Any]] | None = None,
                 read: Callable[[], int] = configversion.read) -> None:
        self._interval = interval
        self._connect = connect or _pg_connection
        self._read = read
        self._version: int | None = None
        self._read_at = float("-inf")  # when the read of _version began
        self._checked_at = float("-inf")  # when the last read (even a failed one) began
        self._checking: asyncio.Future[None] | None = None
        self.listening = False

    async def latest(self) -> tuple[int, float] | None:
        if time.monotonic() - self._checked_at >= self._interval:
            running = self._checking
            if running is None or running.done() or running.get_loop() is not asyncio.get_running_loop():
                running = self._checking = asyncio.ensure_future(self._check())
            try:
                await asyncio.wait_for(asyncio.shield(running), CHECK_WAIT)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - _check logs; the copy held serves
                pass
        return None if self._version is None else (self._version, self._read_at)

    async def _check(self) -> None:
        started = time.monotonic()
        try:
            version = await hop(self._read)
        except Exception as exc:  # noqa: BLE001 - the database away: the copy held serves, tried again later
            log.warning("configuration version not read (%s); serving the copy held", type(exc).__name__)
            self._checked_at = started
            return
        self._version, self._read_at = version, started
        self._checked_at = started

    async def listen(self, changed: Callable[[], None]) -> None:
        warned = False
        while True:
            try:
                conn = await self._connect()
            except Exception as exc:  # noqa: BLE001 - the database away: try again, reads bound the delay
                if not warned:
                    log.warning("not listening for configuration changes (%s); version read every %g s",
                                type(exc).__name__, self._interval)
                    warned = True
                await asyncio.sleep(LISTEN_RETRY)
                continue
            try:
                await conn.execute(f"LISTEN {configversion.CHANNEL}")
                self.listening, warned = True, False
                changed()  # whatever changed while nobody was listening
                while True:
                    async for _ in conn.notifies(timeout=SILENCE_PROBE):
                        changed()
                    await conn.execute("SELECT 1")  # silence: is the connection still there?
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the connection broke: listen again on a new one
                log.warning("configuration listener lost its connection (%s); listening again", type(exc).__name__)
                await asyncio.sleep(LISTEN_RETRY)
            finally:
                self.listening = False
                try:
                    await conn.close()
                except Exception:  # noqa: BLE001 - it is being thrown away
                    pass


async def _pg_connection() -> Any:
    from accounts.pgpool import own_connection

    return await own_connection()


def for_database(vendor: str, name: str, interval: float) -> Watch | None:
    """The watch of the deployment's database; None for an in-memory SQLite (one connection's own)."""

    if vendor == "postgresql":
        return PgVersion(interval)
    db = LoopSqlite.of(vendor, name)
    return None if db is None else SqliteVersion(db)
