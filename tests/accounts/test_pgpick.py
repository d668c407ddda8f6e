"""PostgreSQL: picks made on the event loop rotate exactly, return whole accounts, and fall back when they fail."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable
from typing import TypeVar

import pytest
from django.db import connection

from accounts import pgpick, pool
from accounts.models import Account
from tests.accounts.test_pool import make_pool

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the event-loop pick is PostgreSQL's"),
]
T = TypeVar("T")


@pytest.fixture(autouse=True)
def own_picker(monkeypatch: pytest.MonkeyPatch) -> None:
    # A picker of this test's own, whose connections each run closes: one left open would keep
    # the test database from being dropped at the end of the session.
    monkeypatch.setattr(pool, "picker", pgpick.AsyncPicker())


def run(work: Awaitable[T]) -> T:
    async def closing() -> T:
        try:
            return await work
        finally:
            await pool.picker.aclose()

    return asyncio.run(closing())


async def sequential(provider_id: int, n: int) -> list[Account | None]:
    return [await pool.pick(provider_id, [], "lru") for _ in range(n)]


def test_picks_rotate_in_lru_order_and_return_the_whole_account() -> None:
    provider, accounts = make_pool(3)
    picked = run(sequential(provider.pk, 6))
    assert [a.pk for a in picked if a] == [a.pk for a in accounts] * 2
    first = picked[0]
    assert first is not None and first.label == "a0" and first.get_secret() == "sk-test-secret-0"
    assert first.provider_id == provider.pk and first.status == Account.ACTIVE
    assert all(a.last_used_at is not None for a in Account.objects.all())


def test_concurrent_picks_share_the_connections_and_stay_exact() -> None:
    provider, accounts = make_pool(3)
    async def many() -> list[Account | None]:
        # More picks at once than the picker has connections: the rest wait for one.
        return await asyncio.gather(*(pool.pick(provider.pk, [], "lru") for _ in range(pgpick.CONNECTIONS * 6)))

    picked = run(many())
    counts = Counter(a.pk for a in picked if a)
    assert sum(counts.values()) == pgpick.CONNECTIONS * 6
    assert set(counts.values()) == {pgpick.CONNECTIONS * 2}  # 24 picks over 3 accounts: 8 each


def test_excluded_and_disabled_accounts_are_skipped_and_none_is_returned_when_nothing_is_left() -> None:
    provider, (a0, a1) = make_pool(2)
    pool.disable_account(a1.pk, rule="r", tier="auth_invalid", status_code=401, excerpt="bad")

    async def picks() -> tuple[Account | None, Account | None]:
        return await pool.pick(provider.pk, [], "lru"), await pool.pick(provider.pk, [a0.pk], "lru")

    chosen, nothing = run(picks())
    assert chosen is not None and chosen.pk == a0.pk
    assert nothing is None


def test_a_failing_connection_falls_back_to_the_django_pick(monkeypatch: pytest.MonkeyPatch) -> None:
    provider, (a0,) = make_pool(1)

    async def refuse() -> None:
        raise OSError("connection refused")

    monkeypatch.setattr(pgpick, "_connect", refuse)
    chosen = run(pool.pick(provider.pk, [], "lru"))
    assert chosen is not None and chosen.pk == a0.pk
