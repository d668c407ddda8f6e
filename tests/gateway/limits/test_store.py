"""One set of scenarios, two stores: the counts in this process and in Redis must agree."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from gateway.limits.store import Granted, LocalStore, RedisStore, Store

REDIS_URL = os.environ.get("REDIS_URL", "")

STORES = ["local", pytest.param("redis", marks=pytest.mark.skipif(
    not REDIS_URL.startswith("redis://"), reason="REDIS_URL is not set to a Redis server"))]


def run(kind: str, scenario: Callable[[Store, str], Coroutine[Any, Any, None]]) -> None:
    async def go() -> None:
        store: Store = LocalStore() if kind == "local" else RedisStore(REDIS_URL)
        try:
            await scenario(store, f"test:{uuid.uuid4().hex}")  # a scope no other run shares
        finally:
            if isinstance(store, RedisStore):
                assert store.breaker.closed, "Redis failed during the scenario"
                await store.aclose()

    asyncio.run(go())


@pytest.mark.parametrize("kind", STORES)
def test_window_counts_every_hit(kind: str) -> None:
    async def scenario(store: Store, scope: str) -> None:
        assert [await store.hit(scope, 60) for _ in range(3)] == [1, 2, 3]

    run(kind, scenario)


@pytest.mark.parametrize("kind", STORES)
def test_slots_up_to_the_cap_and_given_back(kind: str) -> None:
    async def scenario(store: Store, scope: str) -> None:
        assert await store.take(scope, "r1", 2, 30) == Granted(True, 0, 1)
        assert await store.take(scope, "r2", 2, 30) == Granted(True, 0, 2)
        assert await store.take(scope, "r3", 2, 30) == Granted(False, 0, 2)
        await store.give_back(scope, "r1", 0)
        assert (await store.take(scope, "r3", 2, 30)).ok

    run(kind, scenario)


@pytest.mark.parametrize("kind", STORES)
def test_a_lease_not_renewed_lapses_and_a_renewed_one_lives(kind: str) -> None:
    async def scenario(store: Store, scope: str) -> None:
        assert (await store.take(scope, "crashed", 2, 0.3)).ok
        assert (await store.take(scope, "alive", 2, 0.3)).ok
        await asyncio.sleep(0.2)
        await store.renew([(scope, "alive")], 0.3)
        await asyncio.sleep(0.2)
        assert await store.take(scope, "new", 2, 30) == Granted(True, 0, 2)  # "crashed" lapsed
        await store.renew([(scope, "crashed")], 30)  # a lapsed lease is not brought back
        assert not (await store.take(scope, "newer", 2, 30)).ok

    run(kind, scenario)


@pytest.mark.parametrize("kind", STORES)
def test_reservations_count_until_settled_with_what_was_spent(kind: str) -> None:
    async def scenario(store: Store, scope: str) -> None:
        assert await store.reserve(scope, "r1:60", 60, 100, 0, 30, 600) == Granted(True, 0, 0)
        assert await store.reserve(scope, "r2:60", 60, 100, 0, 30, 600) == Granted(True, 0, 60)
        assert await store.reserve(scope, "r3:1", 1, 100, 0, 30, 600) == Granted(False, 0, 120)
        await store.give_back(scope, "r1:60", 10)  # it spent 10 of its 60
        assert await store.reserve(scope, "r3:1", 1, 100, 0, 30, 600) == Granted(True, 10, 60)
        await store.give_back(scope, "r2:60", 95)  # more than reserved: charged what it spent
        await store.give_back(scope, "r3:1", 0)  # failed: nothing spent
        assert await store.reserve(scope, "r4:1", 1, 100, 0, 30, 600) == Granted(False, 105, 0)

    run(kind, scenario)


@pytest.mark.parametrize("kind", STORES)
def test_the_log_is_a_floor_under_the_used_counter(kind: str) -> None:
    async def scenario(store: Store, scope: str) -> None:
        assert await store.reserve(scope, "r1:5", 5, 100, 40, 30, 600) == Granted(True, 40, 0)
        await store.give_back(scope, "r1:5", 5)
        # The log caught up with more than this store saw (another process, a lost counter): it wins.
        assert await store.reserve(scope, "r2:5", 5, 100, 70, 30, 600) == Granted(True, 70, 0)
        # A lagging log does not lower what was counted.
        assert await store.reserve(scope, "r3:5", 5, 100, 0, 30, 600) == Granted(True, 70, 5)
        assert await store.reserve(scope, "r4:5", 5, 100, 100, 30, 600) == Granted(False, 100, 10)

    run(kind, scenario)


@pytest.mark.parametrize("kind", STORES)
def test_a_reservation_a_crashed_process_left_lapses(kind: str) -> None:
    async def scenario(store: Store, scope: str) -> None:
        assert (await store.reserve(scope, "dead:150", 150, 100, 0, 0.2, 600)).ok
        assert not (await store.reserve(scope, "r2:5", 5, 100, 0, 30, 600)).ok
        await asyncio.sleep(0.3)
        assert await store.reserve(scope, "r2:5", 5, 100, 0, 30, 600) == Granted(True, 0, 0)

    run(kind, scenario)

