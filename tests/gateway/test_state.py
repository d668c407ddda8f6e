"""The configuration cache: a copy served for its TTL, then re-read in the background while the
stale copy is still served; with a TTL of 0 every request waits for a fresh read."""

from __future__ import annotations

import asyncio
import threading
import time

from gateway.state import KeyInfo, Snapshot, SnapshotCache
from tests.gateway.fakes import client_key, provider, snapshot


class Database:
    """Snapshots read in turn (a worker thread runs the read); ``gate`` holds a read up."""

    def __init__(self, *snaps: Snapshot) -> None:
        self.snaps = list(snaps)
        self.reads = 0
        self.gate = threading.Event()
        self.gate.set()

    def load(self) -> Snapshot:
        assert self.gate.wait(5), "the read was never let through"
        snap = self.snaps[min(self.reads, len(self.snaps) - 1)]
        self.reads += 1
        return snap


def versions() -> tuple[Snapshot, Snapshot]:
    return snapshot([provider(1)]), snapshot([provider(1), provider(2)])


def test_a_copy_is_served_for_its_ttl_without_reading_again() -> None:
    old, new = versions()
    db = Database(old, new)

    async def work() -> list[Snapshot]:
        cache = SnapshotCache(60.0, load=db.load)
        return [await cache.get() for _ in range(5)]

    assert all(s is old for s in asyncio.run(work())) and db.reads == 1


def test_past_its_ttl_the_stale_copy_is_served_at_once_while_a_fresh_one_is_read() -> None:
    old, new = versions()
    db = Database(old, new)

    async def work() -> tuple[Snapshot, float, Snapshot, Snapshot]:
        cache = SnapshotCache(0.05, load=db.load)
        await cache.get()
        await asyncio.sleep(0.06)
        db.gate.clear()  # the re-read is slow
        t0 = time.monotonic()
        stale = await cache.get()
        waited = time.monotonic() - t0
        still = await cache.get()  # one re-read at a time: this one does not start another
        db.gate.set()
        deadline = time.monotonic() + 2
        while db.reads < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.01)
        return stale, waited, still, await cache.get()

    stale, waited, still, fresh = asyncio.run(work())
    assert stale is old and still is old and waited < 0.05
    assert fresh is new and db.reads == 2


def test_with_a_ttl_of_zero_every_get_waits_for_a_fresh_read() -> None:
    old, new = versions()
    db = Database(old, new)

    async def work() -> tuple[Snapshot, Snapshot, bool]:
        cache = SnapshotCache(0.0, load=db.load)
        first = await cache.get()
        db.gate.clear()
        pending = asyncio.create_task(cache.get())
        await asyncio.sleep(0.05)
        blocked = not pending.done()
        db.gate.set()
        return first, await pending, blocked

    first, second, blocked = asyncio.run(work())
    assert first is old and second is new and blocked


def test_a_failed_re_read_keeps_the_last_copy() -> None:
    old, _ = versions()
    calls = 0

    def load() -> Snapshot:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise OSError("database went away")
        return old

    async def work() -> Snapshot:
        cache = SnapshotCache(0.01, load=load)
        await cache.get()
        await asyncio.sleep(0.02)
        await cache.get()
        await asyncio.sleep(0.05)
        return await cache.get()

    assert asyncio.run(work()) is old and calls >= 2


def test_invalidate_makes_the_next_get_wait_for_a_fresh_read() -> None:
    old, new = versions()
    db = Database(old, new)

    async def work() -> Snapshot:
        cache = SnapshotCache(60.0, load=db.load)
        await cache.get()
        cache.invalidate()
        return await cache.get()

    assert asyncio.run(work()) is new


def test_a_key_is_looked_up_afresh_through_the_caches_reader() -> None:
    info = client_key("gw-new")
    asked: list[str] = []

    def find_key(digest: str) -> KeyInfo | None:
        asked.append(digest)
        return info if digest == "known" else None

    async def work() -> tuple[KeyInfo | None, KeyInfo | None]:
        cache = SnapshotCache(60.0, load=Snapshot, find_key=find_key)
        return await cache.find_key("known"), await cache.find_key("other")

    assert asyncio.run(work()) == (info, None) and asked == ["known", "other"]


class Version:
    """A configuration version as a watch reads it (``gateway.configwatch``): each read now."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.heard: list[object] = []

    async def latest(self) -> tuple[int, float] | None:
        return self.version, time.monotonic()

    async def listen(self, changed: object) -> None:
        return None


def numbered(n: int) -> Snapshot:
    snap = snapshot([provider(i) for i in range(1, n + 1)])
    snap.version = n
    return snap


def test_a_change_signalled_within_the_ttl_makes_the_next_get_wait_for_a_fresh_read() -> None:
    old, new = versions()
    db = Database(old, new)
    learnt: list[bool] = []

    async def work() -> tuple[Snapshot, Snapshot]:
        cache = SnapshotCache(60.0, load=db.load, on_change=lambda: learnt.append(True))
        first = await cache.get()
        cache.changed()  # this process committed a change (or the database told of one)
        return first, await cache.get()

    first, second = asyncio.run(work())
    assert first is old and second is new and learnt == [True]


def test_a_re_read_begun_before_the_change_does_not_count() -> None:
    old, new = versions()
    db = Database(old, old, new)  # the read in flight when the change comes still sees the old copy

    async def work() -> Snapshot:
        cache = SnapshotCache(0.01, load=db.load)
        await cache.get()
        await asyncio.sleep(0.02)
        db.gate.clear()
        await cache.get()  # stale: a background re-read starts, held at the gate
        await asyncio.sleep(0.01)  # ...and is under way
        cache.changed()
        pending = asyncio.create_task(cache.get())
        await asyncio.sleep(0.02)
        db.gate.set()
        return await pending

    assert asyncio.run(work()) is new and db.reads == 3


def test_a_newer_version_in_the_database_makes_the_next_get_wait_and_the_same_version_does_not() -> None:
    db = Database(numbered(1), numbered(2), numbered(3))
    watch = Version(1)

    async def work() -> list[int]:
        cache = SnapshotCache(60.0, load=db.load, watch=watch)
        seen = [(await cache.get()).version, (await cache.get()).version]
        watch.version = 2  # another process committed a change
        seen.append((await cache.get()).version)
        seen.append((await cache.get()).version)
        return seen

    assert asyncio.run(work()) == [1, 1, 2, 2] and db.reads == 2


def test_a_version_that_went_back_a_restored_database_is_read_once_not_forever() -> None:
    restored = numbered(1)
    db = Database(numbered(3), restored)
    watch = Version(3)

    async def work() -> list[Snapshot]:
        cache = SnapshotCache(60.0, load=db.load, watch=watch)
        await cache.get()
        watch.version = 1
        return [await cache.get() for _ in range(3)]

    assert all(s is restored for s in asyncio.run(work())) and db.reads == 2
