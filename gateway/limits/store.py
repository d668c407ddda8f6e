"""Where the limits count: in Redis, shared by every gateway process, or in this process.

Both stores keep the same three things, and ``tests/gateway/limits/test_store.py``
runs one set of scenarios against both:

- **windows** (requests per minute): a counter per key and window, ``INCR`` + ``EXPIRE``;
- **leases**: a sorted set per scope (a key's concurrency slots, or a key's
  budget) of members that expire unless renewed: ``<request id>`` for a
  slot, ``<request id>:<amount>`` for a reservation. A process that dies leaves
  its leases behind, and they lapse ``lease`` seconds later (the limits renew
  live ones every third of that);
- **used**: per budget scope, what finished requests spent, per slice of the
  budget's rolling window (``accounts.budgetwindows``): slice start → amount. A reservation
  drops the slices that left the window, raises each live one to what the request
  log shows for it (Redis lost the counter, or other processes counted without
  Redis) and sums them. The slices are named by the caller's clock, the same one
  that stamps the request log, so that a slice's counter and its log figure
  count the same requests and taking the larger of the two is sound; leases
  lapse by the Redis server's clock, which all processes share.

In Redis each step is one Lua script, so "count what is held, compare, take"
is atomic across processes, and lease times are the Redis server's clock
(``TIME``), not each process's. Names: ``gw:rate:<key id>:<key name>:<minute>``,
``gw:{<scope>}:held`` and ``gw:{<scope>}:used`` (a hash; the braces keep a scope's two
keys in one Redis Cluster slot). The key's name is in every name so that a key
id reused after a deletion starts afresh.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .breaker import Breaker
from accounts.budgetwindows import freeing

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

T = TypeVar("T")

# A Redis that has not answered in this long is treated as down (and opens the breaker).
REDIS_TIMEOUT = 1.0


@dataclass(frozen=True)
class Granted:
    ok: bool
    used: int  # reservations: what finished requests spent in the window (slots: 0)
    held: int  # reservations: what is reserved in flight; slots: how many are taken
    # Refused reservations: the start of the newest slice that must leave the window for ``used`` to fall
    # under the limit (``window.freeing``); None when reservations in flight are what fills it.
    freeing: int | None = None
    # Reservations: the start of the oldest live slice that holds spending (None: nothing spent).
    oldest: int | None = None


class SharedUnavailable(Exception):
    """Redis cannot be asked now (the breaker is open, or it just failed): count in this process."""


class Store(Protocol):
    async def hit(self, name: str, ttl: int) -> int:
        """Count one more in the window ``name`` (dropped ``ttl`` seconds after its first hit)."""

    async def take(self, scope: str, member: str, cap: int, lease: float) -> Granted:
        """Add ``member`` to ``scope``'s leases if fewer than ``cap`` are held."""

    async def reserve(self, scope: str, member: str, amount: int, limit: int, logged: Mapping[int, int],
                      since: int, keep: int, lease: float) -> Granted:
        """Reserve ``amount`` (member ``<id>:<amount>``) while used + reserved is under ``limit``; used:
        the slices from ``since`` on, each at least what ``logged`` (slice start → amount, the request
        log's) shows; the slices are kept ``keep`` seconds."""

    async def look(self, scope: str, limit: int, logged: Mapping[int, int], since: int, keep: int) -> Granted:
        """What :meth:`reserve` would find, reserving nothing (``ok``: under ``limit``)."""

    async def give_back(self, scope: str, member: str, spent: int = 0, at: int = 0, keep: int = 0) -> None:
        """End a lease; add ``spent`` to the scope's slice starting at ``at`` (kept ``keep`` seconds)."""

    async def renew(self, leases: Sequence[tuple[str, str]], lease: float) -> None:
        """Extend live leases by ``lease`` seconds from now (lapsed ones stay lapsed)."""


def _amount(member: str) -> int:
    return int(member.rpartition(":")[2])


def _oldest(slices: Mapping[int, int]) -> int | None:
    return min((start for start, n in slices.items() if n > 0), default=None)


class LocalStore:
    """This process's counts: exact for one process, and what every process falls back to."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._windows: dict[str, tuple[int, float]] = {}  # name → (count, dropped at)
        self._held: dict[str, dict[str, float]] = {}  # scope → member → lapses at
        self._used: dict[str, tuple[dict[int, int], float]] = {}  # scope → (slice start → used, dropped at)

    async def hit(self, name: str, ttl: int) -> int:
        now = self._clock()
        count, drop = self._windows.get(name, (0, now + ttl))
        if drop <= now:
            count, drop = 0, now + ttl
        self._windows[name] = (count + 1, drop)
        if len(self._windows) > 10_000:  # windows of keys seen long ago are dropped, not kept forever
            self._windows = {k: v for k, v in self._windows.items() if v[1] > now}
        return count + 1

    def _live(self, scope: str) -> dict[str, float]:
        now = self._clock()
        held = self._held.setdefault(scope, {})
        for member in [m for m, until in held.items() if until <= now]:
            del held[member]
        return held

    async def take(self, scope: str, member: str, cap: int, lease: float) -> Granted:
        held = self._live(scope)
        if len(held) >= cap:
            return Granted(False, 0, len(held))
        held[member] = self._clock() + lease
        return Granted(True, 0, len(held))

    def _slices(self, scope: str) -> dict[int, int]:
        slices, drop = self._used.get(scope, ({}, 0.0))
        return slices if drop > self._clock() else {}

    def _floored(self, scope: str, logged: Mapping[int, int], since: int, keep: int) -> dict[int, int]:
        """The scope's live slices, each raised to what the log shows for it."""

        slices = {start: n for start, n in self._slices(scope).items() if start >= since}
        for start, n in logged.items():
            if start >= since and slices.get(start, 0) < n:
                slices[start] = n
        if slices:
            self._used[scope] = (slices, self._clock() + keep)
        else:
            self._used.pop(scope, None)
        return slices

    async def reserve(self, scope: str, member: str, amount: int, limit: int, logged: Mapping[int, int],
                      since: int, keep: int, lease: float) -> Granted:
        slices = self._floored(scope, logged, since, keep)
        used, oldest = sum(slices.values()), _oldest(slices)
        held = self._live(scope)
        reserved = sum(_amount(m) for m in held)
        if used + reserved >= limit:
            return Granted(False, used, reserved, freeing(slices, limit), oldest)
        held[member] = self._clock() + lease
        return Granted(True, used, reserved, None, oldest)

    async def look(self, scope: str, limit: int, logged: Mapping[int, int], since: int, keep: int) -> Granted:
        slices = self._floored(scope, logged, since, keep)
        used = sum(slices.values())
        reserved = sum(_amount(m) for m in self._live(scope))
        return Granted(used < limit, used, reserved, freeing(slices, limit) if used >= limit else None,
                       _oldest(slices))

    async def give_back(self, scope: str, member: str, spent: int = 0, at: int = 0, keep: int = 0) -> None:
        held = self._held.get(scope)
        if held is not None:
            held.pop(member, None)
            if not held:
                del self._held[scope]
        if spent:
            slices = self._slices(scope)
            slices[at] = slices.get(at, 0) + spent
            self._used[scope] = (slices, self._clock() + keep)

    async def renew(self, leases: Sequence[tuple[str, str]], lease: float) -> None:
        now = self._clock()
        for scope, member in leases:
            held = self._held.get(scope)
            if held is not None and held.get(member, 0.0) > now:
                held[member] = now + lease
        # Scopes nothing was added to for a whole window are dropped here, on the renewal beat.
        self._used = {k: v for k, v in self._used.items() if v[1] > now}
        self._held = {k: v for k, v in self._held.items() if v}


# Milliseconds on the Redis server's clock.
_NOW = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"

# KEYS: held. ARGV: member, cap, lease ms.
_TAKE = _NOW + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = redis.call('ZCARD', KEYS[1])
if n >= tonumber(ARGV[2]) then return {0, 0, n} end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], 2 * tonumber(ARGV[3]))
return {1, 0, n + 1}
"""

# KEYS: held, used. ARGV: member, amount, limit, lease ms, since, keep s, then (slice start, logged) pairs.
# The slice fields are written back as given (strings), so that a HINCRBY names the same field.
# The refusal's freeing slice is ``window.freeing``, in Lua; -1 for None; the oldest slice holding
# spending likewise. A member "" only looks (``Store.look``): it reserves nothing.
_RESERVE = _NOW + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local limit, since = tonumber(ARGV[3]), tonumber(ARGV[5])
local slices, written = {}, false
local fields = redis.call('HGETALL', KEYS[2])
for i = 1, #fields, 2 do
  local start = tonumber(fields[i])
  if start < since then redis.call('HDEL', KEYS[2], fields[i]) else slices[start] = tonumber(fields[i + 1]) end
end
for i = 7, #ARGV, 2 do
  local start, n = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  if start >= since and (slices[start] or 0) < n then
    slices[start] = n
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
    written = true
  end
end
if written then redis.call('EXPIRE', KEYS[2], ARGV[6]) end
local used, starts, oldest = 0, {}, -1
for start, n in pairs(slices) do
  used = used + n
  starts[#starts + 1] = start
  if n > 0 and (oldest < 0 or start < oldest) then oldest = start end
end
local reserved = 0
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  reserved = reserved + tonumber(string.match(m, ':(%d+)$'))
end
local frees, left = -1, used
if used >= limit then
  table.sort(starts)
  for _, start in ipairs(starts) do
    left = left - slices[start]
    if left < limit then frees = start break end
  end
end
if ARGV[1] == '' then
  if used < limit then return {1, used, reserved, -1, oldest} end
  return {0, used, reserved, frees, oldest}
end
if used + reserved >= limit then
  return {0, used, reserved, frees, oldest}
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], 2 * tonumber(ARGV[4]))
return {1, used, reserved, -1, oldest}
"""

# KEYS: held, used. ARGV: member, spent, slice start, keep s.
_GIVE_BACK = """
redis.call('ZREM', KEYS[1], ARGV[1])
if tonumber(ARGV[2]) > 0 then
  redis.call('HINCRBY', KEYS[2], ARGV[3], ARGV[2])
  redis.call('EXPIRE', KEYS[2], ARGV[4])
end
return 0
"""

# KEYS: held sets. ARGV: lease ms, then one member per key.
_RENEW = _NOW + """
for i, key in ipairs(KEYS) do
  if redis.call('ZSCORE', key, ARGV[i + 1]) then
    redis.call('ZADD', key, 'XX', now + tonumber(ARGV[1]), ARGV[i + 1])
    redis.call('PEXPIRE', key, 2 * tonumber(ARGV[1]))
  end
end
return 0
"""


def _held(scope: str) -> str:
    return f"gw:{{{scope}}}:held"


def _used(scope: str) -> str:
    return f"gw:{{{scope}}}:used"


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


class _Client:
    """One Redis client per event loop (its connections belong to the loop that opened them), with its scripts."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self.take: AsyncScript = redis.register_script(_TAKE)
        self.reserve: AsyncScript = redis.register_script(_RESERVE)
        self.give_back: AsyncScript = redis.register_script(_GIVE_BACK)
        self.renew: AsyncScript = redis.register_script(_RENEW)


class RedisStore:
    """The counts in Redis, behind a breaker: a call the breaker refuses, or one that fails, raises
    :class:`SharedUnavailable` and the caller counts in this process instead."""

    def __init__(self, url: str, breaker: Breaker | None = None, timeout: float = REDIS_TIMEOUT) -> None:
        self.url = url
        self.breaker = breaker or Breaker("Redis (shared limits)")
        self.timeout = timeout
        self._clients: dict[int, _Client] = {}

    def _client(self) -> _Client:
        import redis.asyncio as redis

        loop = id(asyncio.get_running_loop())
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = _Client(redis.Redis.from_url(
                self.url, socket_timeout=self.timeout, socket_connect_timeout=self.timeout))
        return client

    async def _run(self, op: Callable[[_Client], Awaitable[T]]) -> T:
        from redis.exceptions import RedisError

        if not self.breaker.allows():
            raise SharedUnavailable
        try:
            # The socket timeouts bound each read; this bounds the whole call (a connect, a NOSCRIPT retry).
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

    async def hit(self, name: str, ttl: int) -> int:
        async def op(c: _Client) -> int:
            async with c.redis.pipeline(transaction=True) as pipe:
                pipe.incr(f"gw:rate:{name}")
                pipe.expire(f"gw:rate:{name}", ttl)
                count, _ = await pipe.execute()
            return int(count)

        return await self._run(op)

    async def take(self, scope: str, member: str, cap: int, lease: float) -> Granted:
        async def op(c: _Client) -> Any:
            return await c.take(keys=[_held(scope)], args=[member, cap, _ms(lease)])

        return _granted(await self._run(op))

    async def reserve(self, scope: str, member: str, amount: int, limit: int, logged: Mapping[int, int],
                      since: int, keep: int, lease: float) -> Granted:
        pairs = [x for start, n in sorted(logged.items()) if start >= since and n > 0 for x in (start, n)]

        async def op(c: _Client) -> Any:
            return await c.reserve(keys=[_held(scope), _used(scope)],
                                   args=[member, amount, limit, _ms(lease), since, max(1, keep), *pairs])

        return _granted(await self._run(op))

    async def look(self, scope: str, limit: int, logged: Mapping[int, int], since: int, keep: int) -> Granted:
        return await self.reserve(scope, "", 0, limit, logged, since, keep, 0.0)

    async def give_back(self, scope: str, member: str, spent: int = 0, at: int = 0, keep: int = 0) -> None:
        async def op(c: _Client) -> Any:
            return await c.give_back(keys=[_held(scope), _used(scope)], args=[member, spent, at, max(1, keep)])

        await self._run(op)

    async def renew(self, leases: Sequence[tuple[str, str]], lease: float) -> None:
        if not leases:
            return

        async def op(c: _Client) -> Any:
            return await c.renew(keys=[_held(scope) for scope, _ in leases],
                                 args=[_ms(lease), *(member for _, member in leases)])

        await self._run(op)

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.redis.aclose()


def _granted(reply: Any) -> Granted:
    ok, used, held, *rest = (int(x) for x in reply)
    frees = rest[0] if rest else -1
    oldest = rest[1] if len(rest) > 1 else -1
    return Granted(bool(ok), used, held, None if frees < 0 else frees, None if oldest < 0 else oldest)
