"""Each account's headroom (``accounts.headroom``), as its answers report it, kept where a pick reads it in
microseconds — this process's memory — and shared in the background.

On the request path: :meth:`HeadroomBook.observe` reads the rate-limit headers of every upstream
answer (a stream's come with its first bytes), :meth:`short` lists the provider's accounts that a
request would take past what they have left (with when each resets), and :meth:`charge` takes a
sent request off its account's remaining at once, so that a burst does not spend an account twice
before its next answer reports. No I/O on any of these.

In the background (:meth:`run`, every :data:`SYNC_SECONDS`): with ``REDIS_URL`` the reports this
process saw go to Redis (a hash per provider, ``gw:headroom:<provider id>``: account id → the JSON
of ``Headroom.to_json``) and the other processes' come back; a report replaces the one held only
when it is newer. Every :data:`PERSIST_SECONDS` the changed ones are written to ``Account.headroom``
for the dashboard and ``/metrics``; without Redis the other processes' are read back from there,
so several processes on one database still learn of each other's limits, a few seconds late.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from accounts.db import DatabaseUnavailable, hop
from accounts.headroom import Headroom, Need, parse, retry_after

from .shared import SharedRedis, SharedUnavailable

log = logging.getLogger(__name__)

SYNC_SECONDS = 0.5
PERSIST_SECONDS = 5.0
KEEP_SECONDS = 3600  # a provider's hash in Redis outlives its last report by this


class HeadroomBook:
    def __init__(self, redis_url: str = "", clock: Callable[[], float] = time.time) -> None:
        self._by_provider: dict[int, dict[int, Headroom]] = {}
        self._clock = clock
        self._to_share: set[tuple[int, int]] = set()
        self._asked: set[int] = set()  # providers whose reports this process reads from Redis
        self._to_persist: set[tuple[int, int]] = set()
        self.shared = SharedRedis(redis_url, "account headroom") if redis_url else None

    # ----------------------------------------------------------------- the request path

    def observe(self, provider_id: int, account_id: int, status: int, headers: Mapping[str, str]) -> None:
        """An answer of ``account_id``: what its headers say is left (and, for a 429, until when it refuses)."""

        if status != 429 and "anthropic-ratelimit-requests-remaining" not in headers and \
                "x-ratelimit-remaining-requests" not in headers and "x-ratelimit-remaining-tokens" not in headers \
                and "anthropic-ratelimit-tokens-remaining" not in headers:
            return  # an upstream that reports no limits (most of the answers of a proxy, a local model)
        now = self._clock()
        limits = parse(headers, now)
        blocked = 0.0
        if status == 429:
            blocked = retry_after(headers, now) or min(
                (limit.reset_at for limit in limits.values() if limit.remaining <= 0 and limit.reset_at > now),
                default=0.0)
        if not limits and not blocked:
            return
        accounts = self._by_provider.setdefault(provider_id, {})
        held = accounts.get(account_id)
        if held is not None and not limits:
            held.blocked_until = max(held.blocked_until, blocked)
            held.at = now
        else:
            accounts[account_id] = Headroom(now, limits, blocked)
        self._to_share.add((provider_id, account_id))
        self._to_persist.add((provider_id, account_id))

    def short(self, provider_id: int, need: Need) -> dict[int, float]:
        """The provider's accounts that cannot take a request of ``need`` now → when they can again."""

        accounts = self._by_provider.get(provider_id)
        if not accounts:
            return {}
        now = self._clock()
        out = {}
        for account_id, headroom in accounts.items():
            until = headroom.short_until(need, now)
            if until is not None:
                out[account_id] = until
        return out

    def short_one(self, provider_id: int, account_id: int, need: Need) -> bool:
        """Whether one account cannot take a request of ``need`` now."""

        headroom = self._by_provider.get(provider_id, {}).get(account_id)
        return headroom is not None and headroom.short_until(need, self._clock()) is not None

    def charge(self, provider_id: int, account_id: int, need: Need) -> None:
        headroom = self._by_provider.get(provider_id, {}).get(account_id)
        if headroom is not None:
            headroom.charge(need)

    def accounts(self, provider_id: int) -> list[tuple[int, Headroom]]:
        return list(self._by_provider.get(provider_id, {}).items())

    def knows(self, provider_id: int) -> bool:
        return bool(self._by_provider.get(provider_id))

    def asked(self, provider_id: int) -> bool:
        """Whether this process already reads the provider's reports from the others (else: :meth:`fetch`)."""

        return self.shared is None or provider_id in self._asked

    async def fetch(self, provider_id: int) -> None:
        """The first request of a provider in this process: what the other processes know of its accounts
        now (one round trip, once; the background rounds keep it fresh after)."""

        self._asked.add(provider_id)
        if self.shared is None:
            return
        try:
            reply = await self.shared.run(lambda r: r.hgetall(_name(provider_id)))
        except SharedUnavailable:
            return
        self.merge(provider_id, _decoded(reply))

    def get(self, provider_id: int, account_id: int) -> Headroom | None:
        return self._by_provider.get(provider_id, {}).get(account_id)

    # ----------------------------------------------------------------- sharing

    def merge(self, provider_id: int, reports: Iterable[tuple[int, Headroom]]) -> None:
        """Reports from elsewhere: each replaces what is held when it is newer."""

        accounts = self._by_provider.setdefault(provider_id, {})
        for account_id, headroom in reports:
            held = accounts.get(account_id)
            if held is None or headroom.at > held.at:
                accounts[account_id] = headroom

    async def sync(self) -> None:
        """One round with Redis: send what this process saw, take what the others did."""

        if self.shared is None:
            return
        sending, self._to_share = self._to_share, set()
        writes: dict[int, dict[str, bytes]] = {}
        for provider_id, account_id in sending:
            headroom = self.get(provider_id, account_id)
            if headroom is not None:
                writes.setdefault(provider_id, {})[str(account_id)] = orjson.dumps(headroom.to_json())
        providers = sorted(set(self._by_provider) | set(writes) | self._asked)

        async def op(r: Any) -> list[Any]:
            async with r.pipeline(transaction=False) as pipe:
                for provider_id, mapping in writes.items():
                    pipe.hset(_name(provider_id), mapping=mapping)
                    pipe.expire(_name(provider_id), KEEP_SECONDS)
                for provider_id in providers:
                    pipe.hgetall(_name(provider_id))
                return list(await pipe.execute())

        try:
            replies = await self.shared.run(op)
        except SharedUnavailable:
            self._to_share |= sending  # sent on a later round
            return
        for provider_id, reply in zip(providers, replies[2 * len(writes):]):
            self.merge(provider_id, _decoded(reply))

    async def persist(self) -> None:
        """Write the changed reports to ``Account.headroom``; without Redis, read the others' back."""

        changed, self._to_persist = self._to_persist, set()
        rows = {account_id: headroom.to_json() for provider_id, account_id in changed
                if (headroom := self.get(provider_id, account_id)) is not None}
        try:
            stored = await hop(_write_and_read, rows, self.shared is None)
        except DatabaseUnavailable:
            self._to_persist |= changed
            return
        for provider_id, reports in stored.items():
            self.merge(provider_id, reports)

    async def run(self) -> None:
        """The background rounds (the app starts this with its other background work)."""

        last_persist = time.monotonic()
        while True:
            await asyncio.sleep(SYNC_SECONDS)
            try:
                await self.sync()
                if time.monotonic() - last_persist >= PERSIST_SECONDS:
                    last_persist = time.monotonic()
                    await self.persist()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a round that failed is tried again; requests go on
                log.exception("account headroom round failed")

    async def aclose(self) -> None:
        try:
            await self.persist()
        except Exception:  # noqa: BLE001 - at exit: the next process learns the limits again from answers
            log.warning("account headroom not written at exit", exc_info=True)
        if self.shared is not None:
            await self.shared.aclose()


def _name(provider_id: int) -> str:
    return f"gw:headroom:{provider_id}"


def _decoded(reply: Any) -> list[tuple[int, Headroom]]:
    out = []
    for account_id, raw in (reply or {}).items():
        try:
            headroom = Headroom.from_json(orjson.loads(raw))
            if headroom is not None:
                out.append((int(account_id), headroom))
        except (ValueError, orjson.JSONDecodeError):
            continue
    return out


def _write_and_read(rows: dict[int, dict[str, Any]], read: bool) -> dict[int, list[tuple[int, Headroom]]]:
    from django.db import transaction

    from accounts.models import Account

    if rows:
        with transaction.atomic():
            for account_id, data in rows.items():
                Account.objects.filter(pk=account_id).update(headroom=data)
    if not read:
        return {}
    out: dict[int, list[tuple[int, Headroom]]] = {}
    for account_id, provider_id, stored in Account.objects.filter(headroom__isnull=False).values_list(
            "pk", "provider_id", "headroom"):
        headroom = Headroom.from_json(stored)
        if headroom is not None:
            out.setdefault(provider_id, []).append((account_id, headroom))
    return out
