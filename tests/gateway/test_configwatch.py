"""Where a gateway learns the configuration's version: a save bumps it in its transaction; the
watch of each database sees it (SQLite: on the next read; PostgreSQL: a notification on commit, and
a read at most every interval, so a notification lost still lets the change through in time)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from django.db import connection, transaction

from accounts import configversion
from accounts.models import ApiKey
from gateway import configwatch

pytestmark = pytest.mark.django_db(transaction=True)


def make_key(name: str) -> ApiKey:
    key = ApiKey(name=name)
    key.set_key(f"gw-{name}-secret")
    key.save()
    return key


def test_a_save_bumps_the_version_only_when_its_transaction_commits() -> None:
    before = configversion.read()
    with pytest.raises(RuntimeError), transaction.atomic():
        make_key("rolled-back")
        raise RuntimeError
    assert configversion.read() == before
    key = make_key("kept")
    assert configversion.read() > before
    bumped = configversion.read()
    ApiKey.objects.filter(pk=key.pk).update(requests=5)  # bookkeeping through update: no signal
    key.requests = 6
    key.save(update_fields=["requests"])  # bookkeeping: no bump
    assert configversion.read() == bumped
    key.delete()
    assert configversion.read() > bumped


def test_the_watch_of_the_database_sees_a_change_made_elsewhere() -> None:
    watch = configwatch.for_database(connection.vendor, str(connection.settings_dict["NAME"]), interval=0.2)
    if watch is None:
        pytest.skip("an in-memory database has no version to watch")

    async def learnt_after_change() -> tuple[int, int, float]:
        first = await watch.latest()
        assert first is not None
        await asyncio.to_thread(make_key, "elsewhere")  # another connection, as another process's
        changed_at = time.monotonic()
        while True:  # no listener runs here: only the reads can tell
            seen = await watch.latest()
            assert seen is not None
            if seen[0] != first[0]:
                return first[0], seen[0], time.monotonic() - changed_at
            assert time.monotonic() - changed_at < 5, "the change was never seen"
            await asyncio.sleep(0.01)

    before, after, took = asyncio.run(learnt_after_change())
    assert after == configversion.read() != before
    assert took < (0.0 + 0.5 if connection.vendor == "sqlite" else 0.2 + 0.5)  # the next read / the interval


def test_the_postgresql_listener_hears_a_commit(django_db_blocker: Any) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    watch = configwatch.PgVersion(interval=3600.0)  # reads never due: only the notification can tell

    async def heard() -> float:
        got = asyncio.Event()
        listener = asyncio.create_task(watch.listen(got.set))
        while not watch.listening:
            await asyncio.sleep(0.01)
        got.clear()  # the listener's "whatever changed while nobody listened"
        await asyncio.to_thread(make_key, "notified")
        t0 = time.monotonic()
        await asyncio.wait_for(got.wait(), 5)
        listener.cancel()
        return time.monotonic() - t0

    assert asyncio.run(heard()) < 1.0
