"""Stored answers are committed in groups: each request waits for its own answer's commit, and the
answers that arrive while one commit runs share the next."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from conversations import store
from conversations.models import StoredResponse
from gateway.exchange.conversation import Saver

pytestmark = pytest.mark.django_db(transaction=True)


def entry(n: int, text: str = "hi") -> store.Entry:
    return store.Entry(response_id=f"resp_{n}", client_key_id=1, response={"id": f"resp_{n}", "output": [text]})


def test_answers_that_arrive_during_a_commit_share_the_next_and_each_waits_for_its_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    groups: list[list[str]] = []
    real = store.save_many

    def counted(entries: list[store.Entry]) -> None:
        groups.append([e.response_id for e in entries])
        real(entries)

    monkeypatch.setattr(store, "save_many", counted)

    async def go() -> None:
        saver = Saver()
        await asyncio.gather(*(saver.save(entry(n)) for n in range(20)))
        # Every save returned: every answer is in the database now.
        stored = StoredResponse.objects.filter(response_id__startswith="resp_").count
        assert await sync_to_async(stored)() == 20
        await saver.save(entry(3, "again"))  # an id seen before: the newer answer replaces it

    asyncio.run(go())
    assert sorted(sum(groups[:-1], [])) == sorted(f"resp_{n}" for n in range(20))
    assert len(groups) < 20  # shared commits: the first alone, the rest together
    assert store.find("resp_3", 1).response["output"] == ["again"]  # type: ignore[union-attr]


def test_a_failed_commit_reaches_every_request_of_its_group(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(entries: list[Any]) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(store, "save_many", broken)

    async def go() -> list[Any]:
        saver = Saver()
        return await asyncio.gather(*(saver.save(entry(n)) for n in range(5)), return_exceptions=True)

    results = asyncio.run(go())
    assert [type(r) for r in results] == [RuntimeError] * 5
