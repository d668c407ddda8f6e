"""Which account a session was last served by, per provider: in this process, and in Redis across processes.

Keyed by (provider, session digest): a session that changes model — Claude Code's side calls to a
small model — keeps its account on each provider it reaches. An entry lives ``ttl`` seconds after
its session's last request (sliding: each lookup renews it), as long as the provider keeps the
prompt cache that makes the account worth returning to.

:class:`MemoryAffinity` is bounded: past ``cap`` sessions the one used longest ago is forgotten
(an ``OrderedDict`` kept in use order; ``make bench`` measures the bytes per session), and expired
entries go from its oldest end as new ones come. With
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
# Expired entries dropped from the oldest end on each remember (it adds one at most, so the expired
# drain faster than they come); bounded, so that a remember after a long quiet spell stays O(1).
SWEEP = 16


class MemoryAffinity:
    """Entries in use order, the least recently used first: ``b"<provider id>:" + session digest`` →
    ``(account id, expires)``. A bytes key and a tuple take about 240 bytes an entry where a tuple key
    and a list took 330 (``make bench``'s figure), 48 MB at the cap rather than 66.

    An entry is dropped when a lookup finds it expired, when the cap pushes it out, or by the sweep on
    :meth:`remember`: a finished session is never looked up again, and without the sweep its entry
    stayed until the cap pushed it out — a busy process held ``cap`` sessions whatever the TTL. The
    sweep stops at the first live entry; one that lives longer (an hour-long cache) keeps the
    shorter-lived behind it until it expires or the cap comes.
    """

    def __init__(self, cap: int = DEFAULT_CAP, clock: Callable[[], float] = time.monotonic) -> None:
        self.cap = cap
        self._clock = clock
        self._entries: OrderedDict[bytes, tuple[int, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, provider_id: int, session: bytes, ttl: float) -> int | None:
        key = _key(provider_id, session)
        entry = self._entries.get(key)
        if entry is None:
            return None
        now = self._clock()
        if entry[1] <= now:
            del self._entries[key]
            return None
        self._entries[key] = (entry[0], now + ttl)
        self._entries.move_to_end(key)
        return entry[0]

    def remember(self, provider_id: int, session: bytes, account_id: int, ttl: float) -> None:
        key = _key(provider_id, session)
        now = self._clock()
        entries = self._entries
        entries[key] = (account_id, now + ttl)
        entries.move_to_end(key)
        if entries[next(iter(entries))][1] <= now:
            self._sweep(now)
        while len(entries) > self.cap:
            entries.popitem(last=False)

    def _sweep(self, now: float) -> None:
        entries = self._entries
        for _ in range(SWEEP):
            oldest = next(iter(entries), None)
            if oldest is None or entries[oldest][1] > now:
                return
            del entries[oldest]


def _key(provider_id: int, session: bytes) -> bytes:
    return b"%d:" % provider_id + session


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
