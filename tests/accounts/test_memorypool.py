"""The in-memory pool of a SQLite deployment: the database stays the record, changes are seen at once
in this process and within the TTL from another."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from django.db import connection

from accounts import pool
from accounts.memorypool import MemoryPool
from accounts.models import Account
from tests.accounts.pools import make_pool, picks, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_rotations_stamps_reach_the_database_in_batches() -> None:
    provider, accounts = make_pool(3)
    ids = [a.pk for a in accounts]
    memory = MemoryPool(ttl=60)

    async def work() -> list[int]:
        return [(await memory.pick(provider.pk, [], "lru")).pk for _ in range(7)]  # type: ignore[union-attr]

    pool.state_changed.connect(memory.on_state_change)
    try:
        assert asyncio.run(work()) == ids + ids + ids[:1]
        assert all(a.last_used_at is None for a in Account.objects.all())  # written in batches, not per pick
        memory.flush()
    finally:
        pool.state_changed.disconnect(memory.on_state_change)
    stamped = {a.pk: a.last_used_at for a in Account.objects.all()}
    assert stamped[ids[1]] < stamped[ids[2]] < stamped[ids[0]]  # the last pick of each, in pick order


def test_closing_the_pool_writes_its_stamps() -> None:
    provider, (a0,) = make_pool(1)
    assert picks(MemoryPool(ttl=60), provider.pk, 1) == [a0.pk]  # run() closes the pool after
    a0.refresh_from_db()
    assert a0.last_used_at is not None


def test_the_rotation_goes_on_across_a_reread_with_stamps_still_unwritten() -> None:
    provider, accounts = make_pool(3)
    ids = [a.pk for a in accounts]
    memory = MemoryPool(ttl=60)

    async def work() -> list[int]:
        out = [(await memory.pick(provider.pk, [], "lru")).pk for _ in range(2)]  # type: ignore[union-attr]
        memory.invalidate()
        out += [(await memory.pick(provider.pk, [], "lru")).pk for _ in range(2)]  # type: ignore[union-attr]
        return out

    assert run(memory, work) == ids[:2] + [ids[2], ids[0]]


def test_an_account_added_or_reenabled_in_this_process_is_picked_at_once() -> None:
    provider, (a0,) = make_pool(1)
    memory = MemoryPool(ttl=60)
    Account.objects.filter(pk=a0.pk).update(status=Account.DISABLED)  # no signal: the pool can't know yet

    async def work() -> list[int | None]:
        out = []
        first = await memory.pick(provider.pk, [], "lru")
        out.append(first.pk if first else None)
        await asyncio.to_thread(pool.enable_account, a0.pk)
        out.append((await memory.pick(provider.pk, [], "lru")).pk)  # type: ignore[union-attr]
        added = Account(provider=provider, label="new")
        added.set_secret("sk-test-secret-new")
        await asyncio.to_thread(added.save)
        memory.invalidate()  # the app connects this to the model's post_save
        out.append((await memory.pick(provider.pk, [], "lru")).pk)  # type: ignore[union-attr]
        return out + [added.pk]

    none, enabled, newest, added_pk = run(memory, work)
    assert (none, enabled, newest) == (None, a0.pk, added_pk)  # never used: first in LRU order


def test_a_provider_added_by_another_process_is_picked_from_at_once_not_found_empty() -> None:
    provider, (a0,) = make_pool(1)
    memory = MemoryPool(ttl=60)  # nothing would be re-read for a minute

    async def work() -> tuple[int | None, int | None]:
        first = await memory.pick(provider.pk, [], "lru")
        # loadconfig in another process (no signal reaches this pool); the configuration, re-read on
        # its own schedule, routes a request to the new provider before this pool's re-read is due.
        late, (b0,) = await asyncio.to_thread(make_pool, 1, "lru", "late")
        picked = await memory.pick(late.pk, [], "lru")
        return (first.pk if first else None), (picked.pk if picked and picked.pk == b0.pk else None)

    first, picked = run(memory, work)
    assert first == a0.pk and picked is not None


def test_a_provider_without_accounts_is_answered_empty_without_a_re_read_each_time() -> None:
    empty, _ = make_pool(0)
    memory = MemoryPool(ttl=60)
    reads = 0
    load = memory._load

    def counting() -> Any:
        nonlocal reads
        reads += 1
        return load()

    memory._load = counting  # type: ignore[method-assign]
    assert picks(memory, empty.pk, 5) == [None] * 5
    assert reads == 1


@pytest.mark.skipif(connection.vendor != "sqlite", reason="another process changes the pool on SQLite")
def test_a_change_made_by_another_process_is_seen_within_the_ttl() -> None:
    provider, (a0, a1) = make_pool(2)
    memory = MemoryPool(ttl=0.2)

    async def serve() -> tuple[float, list[int]]:  # one event loop, as in the gateway
        await memory.pick(provider.pk, [], "lru")
        await asyncio.to_thread(Account.objects.filter(pk=a0.pk).update, status=Account.DISABLED)
        changed = time.monotonic()
        seen: list[int] = []
        while time.monotonic() - changed < 3:
            seen = [(await memory.pick(provider.pk, [], "lru")).pk for _ in range(4)]  # type: ignore[union-attr]
            if a0.pk not in seen:
                break
            await asyncio.sleep(0.02)
        return time.monotonic() - changed, seen

    waited, seen = run(memory, serve)
    assert seen == [a1.pk] * 4
    assert waited < 1.0  # the TTL and one background re-read, not more
