"""Which account a session was last served by, per provider: in this process, and in Redis across processes.

Keyed by (provider, session digest): a session that changes model — Claude Code's side calls to a
small model — keeps its account on each provider it reaches. An entry lives ``ttl`` seconds after
its session's last request (sliding: each lookup renews it), as long as the provider keeps the
prompt cache that makes the account worth returning to.

:class:`MemoryAffinity` is bounded: past ``cap`` sessions the one used longest ago is forgotten
(an ``OrderedDict`` kept in use order; ``make bench`` measures the bytes per session). With
``REDIS_URL``, :class:`Affinity` asks Redis first (``GETEX`` reads and renews in one round trip;
``SET … EX`` remembers), so every gateway process sends a session's turns to the same account; the
memory copy is written too and answers while Redis is away (the breaker of ``shared.py``). Redis
names: ``gw:aff:<provider id>:<session digest, hex>`` → the account id.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from .shared import SharedRedis, SharedUnavailable

DEFAULT_CAP = 200_000


class MemoryAffinity:
    def __init__(self, cap: int = DEFAULT_CAP, clock: Callable[[], float] = time.monotonic) -> None:
        self.cap = cap
        self._clock = clock
        self._entries: OrderedDict[tuple[int, bytes], list[float]] = OrderedDict()  # → [account id, expires]

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, provider_id: int, session: bytes, ttl: float) -> int | None:
        key = (provider_id, session)
        entry = self._entries.get(key)
        if entry is None:
            return None
        now = self._clock()
        if entry[1] <= now:
            del self._entries[key]
            return None
        entry[1] = now + ttl
        self._entries.move_to_end(key)
        return int(entry[0])

    def remember(self, provider_id: int, session: bytes, account_id: int, ttl: float) -> None:
        key = (provider_id, session)
        self._entries[key] = [float(account_id), self._clock() + ttl]
        self._entries.move_to_end(key)
        while len(self._entries) > self.cap:
            self._entries.popitem(last=False)


class Affinity:
    """The store a gateway uses: Redis when configured (and answering), this process's memory otherwise."""

    def __init__(self, redis_url: str = "", cap: int = DEFAULT_CAP) -> None:
        self.memory = MemoryAffinity(cap)
        self.shared = SharedRedis(redis_url, "session affinity") if redis_url else None

    async def lookup(self, provider_id: int, session: bytes, ttl: float) -> int | None:
        if self.shared is not None:
            name = _name(provider_id, session)
            try:
                value = await self.shared.run(lambda r: r.getex(name, ex=max(1, int(ttl))))
            except SharedUnavailable:
                return self.memory.lookup(provider_id, session, ttl)
            if value is None:
                return None
            account_id = int(value)
            self.memory.remember(provider_id, session, account_id, ttl)
            return account_id
        return self.memory.lookup(provider_id, session, ttl)

    async def remember(self, provider_id: int, session: bytes, account_id: int, ttl: float) -> None:
        self.memory.remember(provider_id, session, account_id, ttl)
        if self.shared is not None:
            name = _name(provider_id, session)
            try:
                await self.shared.run(lambda r: r.set(name, account_id, ex=max(1, int(ttl))))
            except SharedUnavailable:
                pass  # this process remembers; the others find the session anew

    async def aclose(self) -> None:
        if self.shared is not None:
            await self.shared.aclose()


def _name(provider_id: int, session: bytes) -> str:
    return f"gw:aff:{provider_id}:{session.hex()}"
