"""The PostgreSQL pool: one round trip a pick on the event loop, whole accounts back, and a database
that went away is met with a new connection or a clear failure."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.db import connection

from accounts import pgpool
from accounts.db import DatabaseUnavailable
from accounts.pgpool import PgPool
from tests.accounts.pools import make_pool, picks, run

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the PostgreSQL pool"),
]


def test_picks_return_the_whole_account() -> None:
    provider, (a0,) = make_pool(1)
    p = PgPool()

    async def work() -> Any:
        return await p.pick(provider.pk, [], "lru")

    account = run(p, work)
    assert account.label == "a0" and account.get_secret() == "sk-test-secret-0"
    assert account.provider_id == provider.pk and account.last_used_at is not None


def test_concurrent_picks_share_the_connections_and_stay_exact() -> None:
    provider, accounts = make_pool(4)
    p = PgPool(connections=2)

    async def work() -> list[int]:
        chosen = await asyncio.gather(*(p.pick(provider.pk, [], "lru") for _ in range(40)))
        return [a.pk for a in chosen if a is not None]

    chosen = run(p, work)
    assert sorted(chosen.count(a.pk) for a in accounts) == [10] * 4


def test_a_broken_connection_is_replaced_on_the_next_pick() -> None:
    provider, (a0, a1) = make_pool(2)
    p = PgPool(connections=1)

    async def work() -> list[int | None]:
        first = await p.pick(provider.pk, [], "lru")
        # The database ends the pool's connection under it (a restart, a failover).
        (conn,) = p._connections()._idle
        await asyncio.to_thread(_terminate, conn.info.backend_pid)
        second = await p.pick(provider.pk, [], "lru")
        return [first.pk if first else None, second.pk if second else None]

    assert run(p, work) == [a0.pk, a1.pk]


def test_with_its_pick_connections_refused_the_pool_picks_from_its_stand_by_copy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    provider, (a0, a1) = make_pool(2)

    async def refuse() -> Any:
        raise OSError("connection refused")

    monkeypatch.setattr(pgpool, "_connect", refuse)
    assert picks(PgPool(), provider.pk, 3) == [a0.pk, a1.pk, a0.pk]  # rotating in this process


def test_a_database_out_of_reach_with_no_copy_read_before_makes_the_pick_fail_clearly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    provider, _ = make_pool(1)

    async def refuse() -> Any:
        raise OSError("connection refused")

    def unreadable(self: Any) -> Any:
        raise DatabaseUnavailable("the database is down")

    monkeypatch.setattr(pgpool, "_connect", refuse)
    monkeypatch.setattr(pgpool.MemoryPool, "_load", unreadable)
    with pytest.raises(DatabaseUnavailable):
        picks(PgPool(), provider.pk, 1)


def _terminate(pid: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
