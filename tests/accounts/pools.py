"""Pools for tests: a provider with accounts, and each pool implementation run on its own event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from django.db import connection

from accounts import pool as pool_state
from accounts.memorypool import MemoryPool
from accounts.models import Account, Provider
from accounts.pgpool import PgPool

T = TypeVar("T")

# Every pool the database of this run can serve: the memory pool always (it reads any database),
# the PostgreSQL pool on PostgreSQL.
KINDS = ["memory", "postgresql"] if connection.vendor == "postgresql" else ["memory"]


def make_pool(n: int, selection: str = "lru", name: str = "p") -> tuple[Provider, list[Account]]:
    provider = Provider.objects.create(name=name, protocol="openai_chat", base_url="http://127.0.0.1:1/v1",
                                       selection=selection)
    accounts = []
    for i in range(n):
        a = Account(provider=provider, label=f"a{i}")
        a.set_secret(f"sk-test-secret-{i}")
        a.save()
        accounts.append(a)
    return provider, accounts


def new_pool(kind: str, ttl: float = 0.0) -> pool_state.Pool:
    return MemoryPool(ttl) if kind == "memory" else PgPool()


def run(pool: pool_state.Pool, work: Callable[[], Awaitable[T]]) -> T:
    """``work`` on a fresh event loop, the pool hearing state changes, its connections closed after."""

    pool_state.state_changed.connect(pool.on_state_change)

    async def closing() -> T:
        try:
            return await work()
        finally:
            await pool.aclose()

    try:
        return asyncio.run(closing())
    finally:
        pool_state.state_changed.disconnect(pool.on_state_change)


def picks(pool: pool_state.Pool, provider_id: int, n: int, exclude: Sequence[int] = (),
          strategy: str = "lru") -> list[int | None]:
    async def work() -> list[int | None]:
        out = []
        for _ in range(n):
            account = await pool.pick(provider_id, exclude, strategy)
            out.append(account.pk if account else None)
        return out

    return run(pool, work)
