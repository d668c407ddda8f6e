"""Session affinity and account headroom shared through a real Redis (REDIS_URL), as two processes share them.

Each side is its own store object with its own Redis client, as two gateway processes have.
"""

from __future__ import annotations

import os
import secrets
import time

import pytest

from gateway.exchange.affinity import Affinity
from gateway.exchange.headroom import HeadroomBook
from gateway.exchange.selection import need_of

from .fakes import run

REDIS_URL = os.environ.get("REDIS_URL", "")
pytestmark = pytest.mark.skipif(not REDIS_URL, reason="needs REDIS_URL")


def provider_id() -> int:
    return 10_000_000 + secrets.randbelow(10_000_000)  # a provider no other run shares


def test_a_session_remembered_by_one_process_is_found_by_another_and_slides() -> None:
    provider = provider_id()
    digest = secrets.token_bytes(16)

    async def go() -> None:
        one, two = Affinity(REDIS_URL), Affinity(REDIS_URL)
        try:
            assert await two.lookup(provider, digest, 300) is None
            await one.remember(provider, digest, 42, ttl=2)
            assert await two.lookup(provider, digest, ttl=2) == 42
            assert len(two.memory) == 1  # and it keeps a copy for when Redis is away
            time.sleep(1.2)
            assert await two.lookup(provider, digest, ttl=2) == 42  # read: two more seconds
            time.sleep(1.2)
            assert await one.lookup(provider, digest, ttl=2) == 42
            time.sleep(2.2)
            assert await one.lookup(provider, digest, ttl=2) is None
        finally:
            await one.aclose()
            await two.aclose()

    run(go)


def test_headroom_one_process_saw_reaches_the_other() -> None:
    provider = provider_id()

    async def go() -> None:
        one, two = HeadroomBook(REDIS_URL), HeadroomBook(REDIS_URL)
        try:
            one.observe(provider, 7, 200, {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "20s"})
            one.observe(provider, 8, 200, {"x-ratelimit-remaining-requests": "5", "x-ratelimit-reset-requests": "20s"})
            await one.sync()
            assert two.short(provider, need_of(1)) == {}
            two.merge(provider, [])  # it asks about this provider from now on
            await two.sync()
            short = two.short(provider, need_of(1))
            assert list(short) == [7] and 19 < short[7] - time.time() <= 20
            # An older report does not replace a newer one.
            two.observe(provider, 7, 200, {"x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "20s"})
            await one.sync()
            await two.sync()
            assert two.short(provider, need_of(1)) == {}
            await two.sync()
            await one.sync()
            assert one.short(provider, need_of(1)) == {}
        finally:
            await one.shared.aclose()  # type: ignore[union-attr]
            await two.shared.aclose()  # type: ignore[union-attr]

    run(go)


def test_with_redis_down_affinity_lives_in_the_process() -> None:
    async def go() -> None:
        affinity = Affinity("redis://127.0.0.1:1/0")  # nothing listens there
        await affinity.remember(1, b"x" * 16, 5, 300)
        assert await affinity.lookup(1, b"x" * 16, 300) == 5
        await affinity.aclose()

    run(go)
