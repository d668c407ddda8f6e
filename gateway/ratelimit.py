"""Per-client-key limits: requests per minute and tokens per day, refused with 429 and ``Retry-After``.

Requests are counted in fixed one-minute windows. With ``REDIS_URL`` set the
count lives in Redis (``INCR`` + ``EXPIRE``), so every gateway process sees the
same number; otherwise it lives in this process, which is exact for the
single-process default. A window boundary can let up to twice the limit through
in a short burst: the price of one round trip per request.

Tokens are today's (UTC) input + output tokens of the key in the request log,
re-read at most every ``GATEWAY_TOKEN_USAGE_TTL`` seconds. The limit is soft:
requests in flight, the log writer's batch delay and the cache can let a key
overshoot a little; the request that crosses the limit is served, the next one
is refused until midnight UTC.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from accounts.db import hop

from .errors import RateLimited
from .state import KeyInfo

log = logging.getLogger(__name__)

WINDOW_SECONDS = 60


class LocalWindows:
    """Fixed windows counted in this process."""

    def __init__(self) -> None:
        self._counts: dict[tuple[int, str], tuple[int, int]] = {}

    async def hit(self, key: KeyInfo, window: int) -> int:
        ident = (key.id, key.name)
        start, count = self._counts.get(ident, (window, 0))
        count = count + 1 if start == window else 1
        self._counts[ident] = (window, count)
        if len(self._counts) > 10_000:  # keys seen long ago are dropped, not kept forever
            self._counts = {k: v for k, v in self._counts.items() if v[0] == window}
        return count


class RedisWindows:
    """Fixed windows counted in Redis, shared by every gateway process."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._clients: dict[int, Any] = {}

    def _client(self) -> Any:
        import redis.asyncio as redis

        # One client per event loop: its connections belong to the loop that opened them.
        loop = id(asyncio.get_running_loop())
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = redis.Redis.from_url(self.url, socket_timeout=1.0,
                                                                socket_connect_timeout=1.0)
        return client

    async def hit(self, key: KeyInfo, window: int) -> int:
        # The name is part of the counter so that a key id reused after a deletion starts afresh.
        name = f"gw:rate:{key.id}:{key.name}:{window}"
        async with self._client().pipeline(transaction=True) as pipe:
            count, _ = await pipe.incr(name).expire(name, WINDOW_SECONDS * 2).execute()
        return int(count)


class TokenUsage:
    """Today's tokens per key, from the request log, cached for ``ttl`` seconds."""

    def __init__(self, ttl: float) -> None:
        self._ttl = ttl
        self._cache: dict[int, tuple[float, dt.date, int]] = {}

    async def today(self, key_id: int) -> int:
        now = time.monotonic()
        day = dt.datetime.now(dt.timezone.utc).date()
        cached = self._cache.get(key_id)
        if cached is not None and cached[0] > now and cached[1] == day:
            return cached[2]
        used = await hop(_tokens_since, key_id, day)
        self._cache[key_id] = (now + self._ttl, day, used)
        return used


def _tokens_since(key_id: int, day: dt.date) -> int:
    from django.db.models import F, Sum

    from accounts.models import RequestLog

    midnight = dt.datetime.combine(day, dt.time(), tzinfo=dt.timezone.utc)
    total = RequestLog.objects.filter(client_key_id=key_id, created_at__gte=midnight).aggregate(
        used=Sum(F("input_tokens") + F("output_tokens")))["used"]
    return int(total or 0)


class Limits:
    def __init__(self, redis_url: str = "", token_usage_ttl: float = 5.0,
                 clock: Callable[[], float] = time.time) -> None:
        """``clock``: the wall clock the one-minute windows are cut from."""

        self.clock = clock
        self.local = LocalWindows()
        self.shared = RedisWindows(redis_url) if redis_url else None
        self.tokens = TokenUsage(token_usage_ttl)

    async def check(self, key: KeyInfo) -> None:
        """Raise :class:`RateLimited` when ``key`` is over one of its limits."""

        if key.rate_limit_per_minute is not None:
            await self._check_rate(key, key.rate_limit_per_minute)
        if key.daily_token_limit is not None:
            used = await self.tokens.today(key.id)
            if used >= key.daily_token_limit:
                now = dt.datetime.now(dt.timezone.utc)
                tomorrow = dt.datetime.combine(now.date() + dt.timedelta(days=1), dt.time(), tzinfo=dt.timezone.utc)
                raise RateLimited(
                    f"This API key has used its {key.daily_token_limit} tokens for today (UTC)",
                    headers={"Retry-After": str(max(1, math.ceil((tomorrow - now).total_seconds())))})

    async def _check_rate(self, key: KeyInfo, limit: int) -> None:
        now = self.clock()
        window = int(now // WINDOW_SECONDS)
        windows = self.shared or self.local
        try:
            count = await windows.hit(key, window)
        except Exception as exc:  # noqa: BLE001 - Redis down: keep limiting, per process, rather than fail
            log.warning("rate counter unavailable (%s); counting in this process", type(exc).__name__)
            count = await self.local.hit(key, window)
        if count > limit:
            retry_after = max(1, math.ceil((window + 1) * WINDOW_SECONDS - now))
            raise RateLimited(f"This API key is limited to {limit} requests per minute",
                              headers={"Retry-After": str(retry_after)})

