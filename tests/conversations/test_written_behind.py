"""Stored answers are written behind: keeping one returns at once, this process reads it from its
cache before it is committed, another process reads it once committed (waiting briefly for the
commit), answers that arrive during a commit share the next one, and a failed commit loses nothing."""

from __future__ import annotations

import asyncio
import random
import string
import tracemalloc
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from conversations import store
from conversations.models import StoredResponse
from gateway.exchange.conversation import Conversations

pytestmark = pytest.mark.django_db(transaction=True)


def entry(n: int, text: str = "hi", previous: str = "", key: int = 1) -> store.Entry:
    return store.Entry(response_id=f"resp_{n}", client_key_id=key, response={"id": f"resp_{n}", "output": [text]},
                       input_items=[{"type": "message", "role": "user", "content": f"q{n}"}],
                       previous_response_id=previous)


def rows() -> int:
    return StoredResponse.objects.filter(response_id__startswith="resp_").count()


async def settled(stored: Conversations) -> None:
    await stored.flush()


def test_a_kept_answer_is_read_back_at_once_and_committed_behind() -> None:
    async def go() -> None:
        stored = Conversations()
        stored.keep(entry(1))
        # Not committed yet (the commit runs on a worker thread after this returns), yet found here.
        found = await stored.find("resp_1", 1)
        assert found is not None and found.response["output"] == ["hi"]
        assert stored._cached("resp_1", 2) is None  # another key never sees it
        await settled(stored)
        assert await sync_to_async(rows)() == 1

    asyncio.run(go())


def test_another_process_finds_an_answer_once_it_is_committed_and_waits_for_the_commit() -> None:
    async def go() -> None:
        here, there = Conversations(), Conversations(wait=3.0, poll=0.02)
        release = asyncio.Event()
        real = store.save_many

        def slow_save(entries: list[store.Entry]) -> None:
            asyncio.run_coroutine_threadsafe(release.wait(), loop).result(5)
            real(entries)

        loop = asyncio.get_running_loop()
        store.save_many = slow_save  # type: ignore[assignment]
        try:
            here.keep(entry(7, "late"))
            reading = asyncio.create_task(there.find("resp_7", 1))
            await asyncio.sleep(0.2)
            assert not reading.done()  # the other process waits for the commit, it does not say unknown
            release.set()
            found = await asyncio.wait_for(reading, 5)
            assert found is not None and found.response["output"] == ["late"]
        finally:
            store.save_many = real  # type: ignore[assignment]

    asyncio.run(go())


def test_an_id_nobody_holds_is_unknown_after_the_wait() -> None:
    async def go() -> None:
        stored = Conversations(wait=0.2, poll=0.05)
        started = asyncio.get_running_loop().time()
        assert await stored.find("resp_nobody", 1) is None
        assert asyncio.get_running_loop().time() - started >= 0.2

    asyncio.run(go())


@pytest.fixture
def commits(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The ids of each group committed, in order (the commits themselves still happen)."""

    groups: list[list[str]] = []
    real = store.save_many

    def counted(entries: list[store.Entry]) -> None:
        groups.append([e.response_id for e in entries])
        real(entries)

    monkeypatch.setattr(store, "save_many", counted)
    return groups


def test_answers_that_arrive_during_a_commit_share_the_next(commits: list[list[str]]) -> None:
    groups = commits

    async def go() -> None:
        stored = Conversations()
        for n in range(20):
            stored.keep(entry(n))
            if n % 5 == 0:
                await asyncio.sleep(0)
        await settled(stored)
        assert await sync_to_async(rows)() == 20

    asyncio.run(go())
    assert sorted(sum(groups, [])) == sorted(f"resp_{n}" for n in range(20))
    assert len(groups) < 20  # shared commits


def test_answers_kept_a_few_ms_apart_share_one_commit(commits: list[list[str]]) -> None:
    """A commit waits ``gather`` for the answers that follow the first (a hop and a transaction each
    would cost more than the rows), and each is read back from this process meanwhile."""

    groups = commits

    async def go() -> None:
        stored = Conversations(gather=0.2)
        for n in range(5):
            stored.keep(entry(n))
            await asyncio.sleep(0.01)  # apart: without the wait, each would be a commit of its own
            found = await stored.find(f"resp_{n}", 1)
            assert found is not None and found.response["id"] == f"resp_{n}"
        assert groups == []  # nothing committed yet: the first still gathers
        await settled(stored)

    asyncio.run(go())
    assert groups == [[f"resp_{n}" for n in range(5)]]


def test_a_failed_commit_keeps_the_answers_served_and_commits_them_later(monkeypatch: pytest.MonkeyPatch) -> None:
    real = store.save_many
    failures = [RuntimeError("database is locked")]

    def flaky(entries: list[Any]) -> None:
        if failures:
            raise failures.pop()
        real(entries)

    monkeypatch.setattr(store, "save_many", flaky)

    async def go() -> None:
        stored = Conversations()
        for n in range(3):
            stored.keep(entry(n))
        await asyncio.sleep(0.1)
        assert (await stored.find("resp_2", 1)) is not None  # still served from the cache meanwhile
        await settled(stored)
        assert await sync_to_async(rows)() == 3

    asyncio.run(go())


def test_a_chain_reads_the_recent_answers_here_and_the_older_from_the_database() -> None:
    async def go() -> None:
        earlier = Conversations()
        earlier.keep(entry(1))
        earlier.keep(entry(2, previous="resp_1"))
        await settled(earlier)
        stored = Conversations()  # a process that never saw the first two
        stored.keep(entry(3, previous="resp_2"))
        stored.keep(entry(4, previous="resp_3"))
        chain = await stored.chain("resp_4", 1)
        assert [e.response_id for e in chain] == ["resp_1", "resp_2", "resp_3", "resp_4"]
        with pytest.raises(store.MissingLink) as missing:
            stored.keep(entry(9, previous="resp_gone"))
            await stored.chain("resp_9", 1)
        assert missing.value.response_id == "resp_gone"

    asyncio.run(go())


def test_deleting_takes_the_answer_out_of_the_cache_and_the_database() -> None:
    async def go() -> None:
        stored = Conversations(wait=0.1)
        stored.keep(entry(5))
        await settled(stored)
        assert await stored.delete("resp_5", 1)
        assert await stored.find("resp_5", 1) is None
        assert await sync_to_async(rows)() == 0
        assert not await stored.delete("resp_5", 1)

    asyncio.run(go())


def test_the_cache_holds_committed_answers_within_its_bytes_and_reads_older_ones_from_the_database() -> None:
    """Agents resend whole conversations, so each answer may carry hundreds of kilobytes: 40 answers
    of 200 KB kept in a process whose cache is 1 MiB leave it holding about a megabyte, not 8."""

    async def go() -> None:
        stored = Conversations(capacity_bytes=1024 * 1024, wait=0.1)
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for n in range(40):
            noise = "".join(random.Random(n).choices(string.ascii_letters, k=200_000))  # hardly compressible
            stored.keep(entry(n, text=f"{n:03d}{noise}"))
            await settled(stored)
        held = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        assert held < 3 * 1024 * 1024, held
        oldest, newest = await stored.find("resp_0", 1), await stored.find("resp_39", 1)
        assert oldest is not None and oldest.response["output"][0].startswith("000")  # from the database
        assert newest is not None and newest.response["output"][0].startswith("039")
        # With the rows gone, only what the cache holds is still found: the newest, not the oldest.
        await sync_to_async(StoredResponse.objects.all().delete)()
        assert await stored.find("resp_0", 1) is None
        kept = await stored.find("resp_39", 1)
        assert kept is not None and kept.response["output"][0].startswith("039")
        assert newest.input_items == [{"type": "message", "role": "user", "content": "q39"}]

    asyncio.run(go())


def test_one_keys_answer_never_replaces_another_keys_answer_of_the_same_id() -> None:
    a = store.Entry(response_id="resp_acc1", client_key_id=1, response={"id": "resp_acc1", "output": ["A"]})
    b = store.Entry(response_id="resp_acc1", client_key_id=2, response={"id": "resp_acc1", "output": ["B"]})
    store.save_many([a])
    store.save_many([b])
    found_a, found_b = store.find("resp_acc1", 1), store.find("resp_acc1", 2)
    assert found_a is not None and found_a.response["output"] == ["A"]
    assert found_b is not None and found_b.response["output"] == ["B"]
    assert store.taken("resp_acc1", 1) and not store.taken("resp_acc1", 3)


def test_an_id_is_taken_only_for_the_key_that_holds_it_keyless_answers_included() -> None:
    store.save_many([store.Entry(response_id="resp_nokey", client_key_id=None, response={"id": "resp_nokey"})])
    assert store.taken("resp_nokey", None)
    assert not store.taken("resp_nokey", 1)
    assert not store.taken("resp_other", None)
    assert not store.taken("resp_nokey'; --", None)  # the id is a parameter, never SQL


def test_on_sqlite_taken_is_read_on_the_loop_and_agrees_with_the_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SQLite file is read on the event loop's own connection (no hop): what another process
    committed is seen at once, keys stay apart, and a read that cannot be made now (the file gone,
    a lock) falls back to the worker thread's read instead of answering wrongly."""

    from django.db import connection

    from accounts.db import LoopSqlite

    loop_db = LoopSqlite.of(connection.vendor, str(connection.settings_dict["NAME"]))
    if loop_db is None:
        pytest.skip("not a SQLite file database")
    store.save_many([store.Entry(response_id="resp_elsewhere", client_key_id=7, response={"id": "resp_elsewhere"})])
    hops: list[str] = []

    async def go() -> None:
        stored = Conversations(loop_db=loop_db)
        assert await stored.taken("resp_elsewhere", 7)  # committed by "another process": not in this cache
        assert not await stored.taken("resp_elsewhere", 8)
        assert not await stored.taken("resp_elsewhere", None)
        assert hops == []  # all three read on the loop
        loop_db._path = "/nonexistent/dir/db.sqlite3"  # cannot be opened: the hop answers
        loop_db.close()
        assert await stored.taken("resp_elsewhere", 7)
        assert hops == ["resp_elsewhere"]

    real = store.taken

    def counted(response_id: str, key_id: int | None) -> bool:
        hops.append(response_id)
        return real(response_id, key_id)

    monkeypatch.setattr(store, "taken", counted)
    try:
        asyncio.run(go())
    finally:
        loop_db.close()
