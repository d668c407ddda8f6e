"""A copy re-read in the background: waited for only when there is none, failures logged, not raised."""

from __future__ import annotations

import asyncio
import logging

import pytest

from accounts.refresh import Refresh


class Source:
    def __init__(self) -> None:
        self.reads = 0
        self.copy = 0
        self.fail = False
        self.gate = asyncio.Event()

    async def reread(self) -> None:
        self.reads += 1
        await self.gate.wait()
        if self.fail:
            raise OSError("database unavailable")
        self.copy = self.reads


def test_the_first_read_is_waited_for_and_a_stale_copy_is_served_while_the_next_runs() -> None:
    async def scenario() -> None:
        src = Source()
        refresh = Refresh(src.reread, "thing")
        src.gate.set()
        await refresh.ensure(60)
        assert src.copy == 1
        src.gate.clear()
        refresh.loaded_at = (refresh.loaded_at or 0) - 120  # past its TTL
        await asyncio.wait_for(refresh.ensure(60), 1)  # returns at once: the re-read is blocked
        await refresh.ensure(60)
        assert src.reads == 2 and src.copy == 1  # one re-read at a time, the old copy meanwhile
        src.gate.set()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert src.copy == 2

    asyncio.run(scenario())


def test_a_ttl_of_zero_waits_for_every_read_and_invalidate_waits_for_the_next() -> None:
    async def scenario() -> None:
        src = Source()
        src.gate.set()
        refresh = Refresh(src.reread, "thing")
        for expected in (1, 2, 3):
            await refresh.ensure(0)
            assert src.copy == expected
        refresh.invalidate()
        await refresh.ensure(60)
        assert src.copy == 4

    asyncio.run(scenario())


def test_a_failed_background_read_is_logged_and_the_last_copy_kept(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        src = Source()
        src.gate.set()
        refresh = Refresh(src.reread, "thing")
        await refresh.ensure(60)
        src.fail = True
        refresh.loaded_at = (refresh.loaded_at or 0) - 120
        await refresh.ensure(60)
        for _ in range(3):
            await asyncio.sleep(0)
        assert src.copy == 1

    with caplog.at_level(logging.WARNING, logger="accounts.refresh"):
        asyncio.run(scenario())
    assert "thing re-read failed" in caplog.text
