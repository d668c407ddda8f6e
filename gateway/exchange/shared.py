"""Redis for the pool's short-lived shared state (session affinity, account headroom), behind a breaker.

The same breaker as the limits' (``gateway.limits.breaker``): a Redis that fails or stops answering
is left alone for a while, and the caller keeps its state in this process meanwhile, so a frozen
Redis costs one timeout per breaker period, not one per request. One client per event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from ..limits.breaker import Breaker
from ..limits.store import REDIS_TIMEOUT, SharedUnavailable

if TYPE_CHECKING:
    from redis.asyncio import Redis

T = TypeVar("T")

__all__ = ["SharedRedis", "SharedUnavailable"]


class SharedRedis:
    def __init__(self, url: str, what: str, timeout: float = REDIS_TIMEOUT) -> None:
        self.url = url
        self.breaker = Breaker(f"Redis ({what})")
        self.timeout = timeout
        self._clients: dict[int, tuple[asyncio.AbstractEventLoop, Redis]] = {}

    def _client(self) -> Redis:
        import redis.asyncio as redis

        loop = asyncio.get_running_loop()
        entry = self._clients.get(id(loop))
        if entry is None or entry[0] is not loop:
            entry = self._clients[id(loop)] = (loop, redis.Redis.from_url(
                self.url, socket_timeout=self.timeout, socket_connect_timeout=self.timeout))
        return entry[1]

    async def run(self, op: Callable[[Redis], Awaitable[T]]) -> T:
        """``op`` on this loop's client; :class:`SharedUnavailable` when the breaker refuses or it fails."""

        from redis.exceptions import RedisError

        if not self.breaker.allows():
            raise SharedUnavailable
        try:
            async with asyncio.timeout(2 * self.timeout):
                result = await op(self._client())
        except (RedisError, OSError, asyncio.TimeoutError) as exc:
            self.breaker.failed(type(exc).__name__)
            raise SharedUnavailable from exc
        except BaseException:
            self.breaker.abandoned()
            raise
        self.breaker.succeeded()
        return result

    async def aclose(self) -> None:
        entry = self._clients.pop(id(asyncio.get_running_loop()), None)
        if entry is not None:
            await entry[1].aclose()
