"""A circuit breaker for the Redis the limits share: one timeout, then per-process counting for a while.

Every rate-limited request asks Redis something before it is served. A Redis
that stops answering (frozen, partitioned) made each of them wait out the
socket timeout (1 s): measured with ``DEBUG SLEEP``, 8 concurrent clients got
8 requests a second through a gateway that served 400 with Redis up. Behind
the breaker a failure (timeout, refused connection, any Redis error) opens it:
for the next ``first`` seconds nobody asks Redis and the limits are kept per
process (``gateway.limits.store.LocalStore``), then one request tries Redis
again while the others go on locally. A failed try opens it again for twice as
long (up to ``most``), a successful one closes it. So a frozen Redis costs one
timeout per breaker period, not one per request. Opening and closing are
logged; the Redis URL (which may carry a password) is not.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Breaker:
    def __init__(self, what: str, first: float = 5.0, most: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        self.first = first
        self.most = most
        self._clock = clock
        self._open_until: float | None = None  # None: closed
        self._backoff = first
        self._trial = False  # open, past its time, and one call is trying the service again

    @property
    def closed(self) -> bool:
        return self._open_until is None

    def allows(self) -> bool:
        """May a call go to the service now? Past an open period, exactly one caller gets True."""

        if self._open_until is None:
            return True
        if self._trial or self._clock() < self._open_until:
            return False
        self._trial = True
        return True

    def succeeded(self) -> None:
        if self._open_until is not None and self._trial:
            log.warning("%s answers again: the breaker is closed", self.what)
            self._open_until, self._backoff, self._trial = None, self.first, False

    def failed(self, reason: str) -> None:
        if self._open_until is None:
            self._backoff = self.first
        elif self._trial:
            self._backoff = min(self._backoff * 2, self.most)
        else:
            return  # a call that started before the breaker opened: the period already runs
        self._trial = False
        self._open_until = self._clock() + self._backoff
        log.warning("%s failed (%s): the breaker is open, limits are kept in this process for %g s",
                    self.what, reason, self._backoff)

    def abandoned(self) -> None:
        """The trial call was cancelled before it knew: the next caller tries instead."""

        self._trial = False
