"""Every database hop from async code: a worker thread, with Django's connection lifecycle around it.

Django checks its connections at the start and the end of each request
(``close_old_connections`` on ``request_started`` / ``request_finished``): one
that broke (the database restarted) or outlived ``CONN_MAX_AGE`` is closed, and
the next query opens a fresh one. The API paths run no such signals (see
``gateway.edge.handler``), and their database work happens on worker threads that
each keep their own connection, so without this a thread went on using a dead
connection after a PostgreSQL restart: wrong keys got 500 instead of 401 and
``/readyz`` stayed unavailable until the process was restarted. Each hop is
therefore one short "request" of its own: connections are checked before it
(with ``CONN_HEALTH_CHECKS``, a reused one is pinged first) and closed after it
when an error left them unusable or they are too old.

The request-log writer's thread (``gateway.log.writer``) does the same around each
batch with :func:`checked_connections`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, ParamSpec, TypeVar

from django.db import InterfaceError, OperationalError, connections

P = ParamSpec("P")
R = TypeVar("R")


class DatabaseUnavailable(Exception):
    """The database could not be reached (down, restarting, refusing connections).

    What needs it answers 503; what it can serve from memory it serves.
    """


def close_stale_connections() -> None:
    """Django's ``close_old_connections``, except for a connection inside a transaction (which
    is not this hop's to end: a caller's ``atomic`` block, a test's)."""

    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close_if_unusable_or_obsolete()


@contextlib.contextmanager
def checked_connections() -> Iterator[None]:
    close_stale_connections()
    try:
        yield
    finally:
        close_stale_connections()


def _checked(fn: Callable[P, R]) -> Callable[P, R]:
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        with checked_connections():
            try:
                return fn(*args, **kwargs)
            except (OperationalError, InterfaceError) as exc:
                raise DatabaseUnavailable(f"{type(exc).__name__}: {exc}"[:300]) from exc

    return call


async def hop(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``fn(*args, **kwargs)`` on a worker thread, its connections checked before and after.

    Not thread-sensitive: hops run concurrently, each on the connection of its own thread.
    A database that cannot be reached raises :class:`DatabaseUnavailable`.

    The loop's executor, in a copy of the caller's context: what asgiref's
    ``sync_to_async(thread_sensitive=False)`` does, less its bookkeeping for threads that call
    back into the loop (which no hop does), 40 µs of CPU a hop on the serving path.
    """

    call = functools.partial(contextvars.copy_context().run, _checked(fn), *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(None, call)


class LoopSqlite:
    """Reads of a SQLite file database on the caller's own thread (the event loop's), no hop.

    A hop costs a thread's wake-up and two hand-overs of the GIL (about 120 µs of CPU here); a
    short indexed read on SQLite costs 5 to 20 µs. In WAL mode (``gateway.settings``) a reader
    never waits for a writer, and the timeout of 0 makes a read that would wait anyway (a WAL
    recovery) fail at once instead of blocking the loop: ``rows`` then answers None, and the
    caller hops. Only for short reads by key: anything that scans belongs on a worker thread.
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._conn: sqlite3.Connection | None = None

    @classmethod
    def of(cls, vendor: str, name: str) -> LoopSqlite | None:
        """The reader of the deployment's database; None unless it is a SQLite file (an in-memory
        database is one connection's own)."""

        if vendor != "sqlite" or not name or name == ":memory:" or "mode=memory" in name or name.startswith(
                "file::memory:"):
            return None
        return cls(name)

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]] | None:
        """The rows of ``sql`` (``%s`` placeholders, as Django's cursors take); None: not read now."""

        try:
            if self._conn is None:
                self._conn = sqlite3.connect(self._path, timeout=0, isolation_level=None, check_same_thread=False)
            return self._conn.execute(sql.replace("%s", "?"), params).fetchall()
        except sqlite3.Error as exc:
            logging.getLogger(__name__).debug("read on the loop skipped: %s", exc)
            self.close()
            return None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


async def rounds(run_once: Callable[[], Awaitable[object]], tick: float, what: str) -> None:
    """Until cancelled: ``run_once`` every ``tick`` seconds, outliving a round that fails (the
    database away, a bug in one round). A failure is logged once, not every tick, and its end too."""

    log = logging.getLogger(__name__)
    failing = False
    while True:
        try:
            await run_once()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the loop must outlive a bad round
            if not failing:
                log.warning("%s rounds failing; trying again every %.0f s", what, tick,
                            exc_info=not isinstance(exc, DatabaseUnavailable))
            failing = True
        else:
            if failing:
                log.info("%s rounds running again", what)
            failing = False
        await asyncio.sleep(tick)
