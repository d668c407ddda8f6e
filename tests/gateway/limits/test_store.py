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


KEEP = 600  # how long slices are kept (a window and a slice, in the limits)
NONE: dict[int, int] = {}  # nothing logged


@pytest.mark.parametrize("kind", STORES)
def test_reservations_count_until_settled_with_what_was_spent(kind: str) -> None:
    async def scenario(store: Store, scope: str) -> None:
        assert await store.reserve(scope, "r1:60", 60, 100, NONE, 0, KEEP, 30) == Granted(True, 0, 0)
        assert await store.reserve(scope, "r2:60", 60, 100, NONE, 0, KEEP, 30) == Granted(True, 0, 60)
        assert await store.reserve(scope, "r3:1", 1, 100, NONE, 0, KEEP, 30) == Granted(False, 0, 120)
        await store.give_back(scope, "r1:60", 10, 0, KEEP)  # it spent 10 of its 60
        assert await store.reserve(scope, "r3:1", 1, 100, NONE, 0, KEEP, 30) == Granted(True, 10, 60, None, 0)
        await store.give_back(scope, "r2:60", 95, 300, KEEP)  # more than reserved: charged what it spent
        await store.give_back(scope, "r3:1", 0, 300, KEEP)  # failed: nothing spent
        # 10 in slice 0 and 95 in slice 300: under 100 once slice 0 has left the window.
        assert await store.reserve(scope, "r4:1", 1, 100, NONE, 0, KEEP, 30) == Granted(False, 105, 0, 0, 0)

    run(kind, scenario)


@pytest.mark.parametrize("kind", STORES)
def test_spend_that_leaves_the_window_frees_the_budget(kind: str) -> None:
    async def scenario(store: Store, scope: str) -> None:
        assert (await store.reserve(scope, "a:1", 1, 100, NONE, 0, KEEP, 30)).ok
        await store.give_back(scope, "a:1", 70, 0, KEEP)
        assert (await store.reserve(scope, "b:1", 1, 100, NONE, 0, KEEP, 30)).ok
        await store.give_back(scope, "b:1", 40, 300, KEEP)
        assert await store.reserve(scope, "c:1", 1, 100, NONE, 0, KEEP, 30) == Granted(False, 110, 0, 0, 0)
        # The window moved on: its first live slice is 300, so the 70 of slice 0 no longer counts.
        assert await store.reserve(scope, "c:1", 1, 100, NONE, 300, KEEP, 30) == Granted(True, 40, 0, None, 300)
        # ... and a window that moved back (another process's clock a little behind) does not bring it back.
        assert await store.reserve(scope, "d:1", 1, 100, NONE, 0, KEEP, 30) == Granted(True, 40, 1, None, 300)

    run(kind, scenario)


@pytest.mark.parametrize("kind", STORES)
def test_a_refusal_names_the_newest_slice_that_must_leave_for_the_rest_to_be_under_the_limit(kind: str) -> None:
    async def scenario(store: Store, scope: str) -> None:
        for i, (at, spent) in enumerate([(1200, 30), (900, 30), (1500, 60), (1800, 5)]):
            assert (await store.reserve(scope, f"r{i}:0", 0, 1000, NONE, 900, KEEP, 30)).ok
            await store.give_back(scope, f"r{i}:0", spent, at, KEEP)
        # 125 in all; once 900 and 1200 have left 65 remain, once 1500 has too 5: 1500 frees it.
        assert await store.reserve(scope, "x:0", 0, 50, NONE, 900, KEEP, 30) == Granted(False, 125, 0, 1500, 900)
        assert (await store.reserve(scope, "y:0", 0, 50, NONE, 1800, KEEP, 30)).ok
        # Reserved in flight, not spent: no slice leaving frees it, the reservations ending do.
        assert await store.reserve(scope, "z:60", 60, 50, NONE, 1800, KEEP, 30) == Granted(True, 5, 0, None, 1800)
        assert await store.reserve(scope, "w:1", 1, 50, NONE, 1800, KEEP, 30) == Granted(False, 5, 60, None, 1800)

    run(kind, scenario)


@pytest.mark.parametrize("kind", STORES)
def test_a_look_finds_what_a_reservation_would_and_reserves_nothing(kind: str) -> None:
    async def scenario(store: Store, scope: str) -> None:
        assert await store.look(scope, 100, NONE, 0, KEEP) == Granted(True, 0, 0)  # nothing spent, no oldest
        assert (await store.reserve(scope, "a:30", 30, 100, NONE, 0, KEEP, 30)).ok
        await store.give_back(scope, "a:30", 60, 300, KEEP)
        assert (await store.reserve(scope, "b:30", 30, 100, NONE, 0, KEEP, 30)).ok
        # 60 spent in slice 300, 30 held: under the limit, the oldest spending in slice 300 ...
        assert await store.look(scope, 100, NONE, 0, KEEP) == Granted(True, 60, 30, None, 300)
        # ... and with the log's floor counted 110, over: slice 300 must leave for the rest to be under.
        assert await store.look(scope, 100, {600: 50}, 0, KEEP) == Granted(False, 110, 30, 300, 300)
        # Looking took nothing: b's 30 is all that is held.
        assert await store.reserve(scope, "c:1", 1, 1000, NONE, 0, KEEP, 30) == Granted(True, 110, 30, None, 300)

    run(kind, scenario)


@pytest.mark.parametrize("kind", STORES)
def test_the_log_is_a_floor_under_each_slice(kind: str) -> None:
    async def scenario(store: Store, scope: str) -> None:
        assert await store.reserve(scope, "r1:5", 5, 100, {0: 40}, 0, KEEP, 30) == Granted(True, 40, 0, None, 0)
        await store.give_back(scope, "r1:5", 5, 0, KEEP)
        # The log caught up with more than this store saw (another process, a lost counter): it wins ...
        assert await store.reserve(scope, "r2:5", 5, 100, {0: 50, 300: 20}, 0, KEEP, 30) == Granted(True, 70, 0, None, 0)
        # ... per slice: slice 0's 50 is not lowered by a log that shows 10 there and more elsewhere.
        assert await store.reserve(scope, "r3:5", 5, 100, {0: 10, 300: 25}, 0, KEEP, 30) == Granted(True, 75, 5, None, 0)
        # A lagging log does not lower what was counted; slices before the window are not counted.
        assert await store.reserve(scope, "r4:5", 5, 100, {-300: 999}, 0, KEEP, 30) == Granted(True, 75, 10, None, 0)
        assert await store.reserve(scope, "r5:5", 5, 100, {600: 25}, 0, KEEP, 30) == Granted(False, 100, 15, 0, 0)

    run(kind, scenario)


@pytest.mark.parametrize("kind", STORES)
def test_a_reservation_a_crashed_process_left_lapses(kind: str) -> None:
    async def scenario(store: Store, scope: str) -> None:
        assert (await store.reserve(scope, "dead:150", 150, 100, NONE, 0, KEEP, 0.2)).ok
        assert not (await store.reserve(scope, "r2:5", 5, 100, NONE, 0, KEEP, 30)).ok
        await asyncio.sleep(0.3)
        assert await store.reserve(scope, "r2:5", 5, 100, NONE, 0, KEEP, 30) == Granted(True, 0, 0)

    run(kind, scenario)


@pytest.mark.skipif(not REDIS_URL.startswith("redis://"), reason="REDIS_URL is not set to a Redis server")
def test_two_redis_stores_share_a_rolling_budget_and_a_lost_hash_falls_back_to_the_log() -> None:
    async def go() -> None:
        import redis.asyncio as redis

        scope = f"test:{uuid.uuid4().hex}"
        one, two = RedisStore(REDIS_URL), RedisStore(REDIS_URL)  # two processes
        try:
            assert (await one.reserve(scope, "a:10", 10, 100, NONE, 0, KEEP, 30)).ok
            await one.give_back(scope, "a:10", 60, 0, KEEP)
            assert (await two.reserve(scope, "b:10", 10, 100, NONE, 0, KEEP, 30)).ok
            await two.give_back(scope, "b:10", 45, 300, KEEP)
            assert await one.reserve(scope, "c:1", 1, 100, NONE, 0, KEEP, 30) == Granted(False, 105, 0, 0, 0)
            assert await two.reserve(scope, "c:1", 1, 100, NONE, 300, KEEP, 30) == Granted(True, 45, 0, None, 300)
            client = redis.Redis.from_url(REDIS_URL)
            ttl = await client.ttl(f"gw:{{{scope}}}:used")
            assert 0 < ttl <= KEEP  # a budget nobody spends from is dropped
            await client.delete(f"gw:{{{scope}}}:used")  # Redis lost the counters ...
            await client.aclose()
            logged = {300: 45, 600: 60}  # ... the log's slices still refuse
            assert await one.reserve(scope, "d:1", 1, 100, logged, 300, KEEP, 30) == Granted(False, 105, 1, 300, 300)
        finally:
            await one.aclose()
            await two.aclose()

    asyncio.run(go())
