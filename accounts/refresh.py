"""Something every request reads, re-read every few seconds in the background.

Past its TTL a copy is still served while a fresh one is read, so no request
waits on the database; a request waits only when there is no copy yet (or the
TTL is 0, the tests' "always exact"). One re-read runs at a time per event loop,
and a re-read that fails in the background is logged, not left as an orphan
task error.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class Refresh:
    def __init__(self, reread: Callable[[], Awaitable[None]], what: str) -> None:
        self._reread = reread
        self._what = what
        self._running: asyncio.Future[None] | None = None
        self.loaded_at: float | None = None  # monotonic time of the last completed re-read

    async def ensure(self, ttl: float) -> None:
        """A copy no older than ``ttl``: waited for only when there is none yet (or ``ttl`` is 0)."""

        loaded_at = self.loaded_at
        running = self.start_if_due(ttl)
        if running is not None and (loaded_at is None or ttl <= 0):
            await asyncio.shield(running)

    def start_if_due(self, ttl: float) -> asyncio.Future[None] | None:
        """Start a re-read in the background if the copy is older than ``ttl`` (or join the one
        running); never wait for it. None when the copy is fresh."""

        loaded_at = self.loaded_at
        if loaded_at is not None and time.monotonic() - loaded_at < ttl:
            return None
        running = self._running
        if running is None or running.done() or running.get_loop() is not asyncio.get_running_loop():
            running = self._running = asyncio.ensure_future(self._run())
            running.add_done_callback(self._retrieved)
        return running

    def invalidate(self) -> None:
        """The next request waits for a fresh copy."""

        self.loaded_at = None

    async def _run(self) -> None:
        await self._reread()
        self.loaded_at = time.monotonic()

    def _retrieved(self, future: asyncio.Future[None]) -> None:
        if not future.cancelled() and future.exception() is not None:
            log.warning("%s re-read failed; serving the last copy", self._what, exc_info=future.exception())
