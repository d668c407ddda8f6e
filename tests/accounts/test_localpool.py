"""The in-memory pool of a SQLite deployment picks exactly as the database pick does, and keeps the record."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from decimal import Decimal

import pytest
from django.test import override_settings
from django.utils import timezone

from accounts import localpool, pool
from accounts.localpool import LocalPool
from accounts.models import Account, DisableEvent
from tests.accounts.test_pool import make_pool

pytestmark = pytest.mark.django_db(transaction=True)


def picks(local: LocalPool, provider_id: int, n: int, exclude: list[int] | None = None,
          strategy: str = "lru") -> list[int | None]:
    async def run() -> list[int | None]:
        out = []
        for _ in range(n):
            account = await local.select(provider_id, exclude or [], strategy)
            out.append(account.pk if account else None)
        return out

    return asyncio.run(run())


@pytest.fixture
def local(monkeypatch: pytest.MonkeyPatch) -> LocalPool:
    # The pool functions tell the module's pool about state changes: make this test's pool that one.
    fresh = LocalPool()
    monkeypatch.setattr(pool, "local_pool", fresh)
    monkeypatch.setattr(localpool, "local_pool", fresh)  # the one the model signals invalidate
    return fresh


@override_settings(GATEWAY_POOL_TTL=60)
def test_rotation_is_exact_lru_and_its_stamps_reach_the_database(local: LocalPool) -> None:
    provider, accounts = make_pool(3)
    ids = [a.pk for a in accounts]
    assert picks(local, provider.pk, 7) == ids + ids + ids[:1]
    assert all(a.last_used_at is None for a in Account.objects.all())  # written in batches, not per pick
    local.write_stamps()
    stamped = {a.pk: a.last_used_at for a in Account.objects.all()}
    assert stamped[ids[1]] < stamped[ids[2]] < stamped[ids[0]]  # the last pick of each, in pick order


@override_settings(GATEWAY_POOL_TTL=60)
def test_the_rotation_goes_on_across_a_reread_with_stamps_still_unwritten(local: LocalPool) -> None:
    provider, accounts = make_pool(3)
    ids = [a.pk for a in accounts]
    assert picks(local, provider.pk, 2) == ids[:2]
    local.invalidate()
    assert picks(local, provider.pk, 2) == [ids[2], ids[0]]


@override_settings(GATEWAY_POOL_TTL=60)
def test_a_disabled_account_is_never_picked_again_without_waiting_for_a_reread(local: LocalPool) -> None:
    provider, (a0, a1, a2) = make_pool(3)
    assert picks(local, provider.pk, 1) == [a0.pk]
    assert pool.disable_account(a1.pk, rule="r", tier="auth_invalid", status_code=401, excerpt="bad")
    assert pool.disable_account(a2.pk, rule="r", tier="tier3", status_code=429, excerpt="x",
                                cooldown_until=timezone.now() + dt.timedelta(hours=1))
    assert picks(local, provider.pk, 3) == [a0.pk] * 3
    assert picks(local, provider.pk, 1, exclude=[a0.pk]) == [None]


@override_settings(GATEWAY_POOL_TTL=60)
def test_an_account_added_or_reenabled_in_this_process_is_picked_at_once(local: LocalPool) -> None:
    provider, (a0,) = make_pool(1)
    Account.objects.filter(pk=a0.pk).update(status=Account.DISABLED)  # no signal: the pool can't know yet
    pool.enable_account(a0.pk)
    assert picks(local, provider.pk, 1) == [a0.pk]
    added = Account(provider=provider, label="new")
    added.set_secret("sk-test-secret-new")
    added.save()
    assert picks(local, provider.pk, 1) == [added.pk]  # never used: first in LRU order


def test_a_change_made_by_another_process_is_seen_within_the_ttl(local: LocalPool) -> None:
    provider, (a0, a1) = make_pool(2)

    async def serve() -> tuple[float, list[int]]:  # one event loop, as in the gateway
        await local.select(provider.pk, [], "lru")
        await asyncio.to_thread(Account.objects.filter(pk=a0.pk).update, status=Account.DISABLED)
        changed = time.monotonic()
        while time.monotonic() - changed < 3:
            seen = [(await local.select(provider.pk, [], "lru")).pk for _ in range(4)]  # type: ignore[union-attr]
            if a0.pk not in seen:
                return time.monotonic() - changed, seen
            await asyncio.sleep(0.02)
        return time.monotonic() - changed, seen

    with override_settings(GATEWAY_POOL_TTL=0.2):
        waited, seen = asyncio.run(serve())
    assert seen == [a1.pk] * 4
    assert waited < 1.0  # the TTL and one background re-read, not more


@override_settings(GATEWAY_POOL_TTL=60)
def test_an_expired_cooldown_is_picked_and_ended_in_the_database(local: LocalPool) -> None:
    provider, (a0, a1) = make_pool(2)
    pool.disable_account(a0.pk, rule="r", tier="tier3", status_code=429, excerpt="x",
                         cooldown_until=timezone.now() - dt.timedelta(seconds=1))
    assert picks(local, provider.pk, 1) == [a0.pk]
    a0.refresh_from_db()
    assert a0.status == Account.ACTIVE and a0.cooldown_until is None
    assert DisableEvent.objects.get(account=a0).ended_by == "cooldown"


@override_settings(GATEWAY_POOL_TTL=60)
def test_balance_strategy_picks_as_the_database_does(local: LocalPool) -> None:
    provider, (a0, a1, a2) = make_pool(3, "balance")
    Account.objects.filter(pk=a0.pk).update(balance=Decimal("1"))
    Account.objects.filter(pk=a1.pk).update(balance=Decimal("50"))
    local.invalidate()
    in_memory = picks(local, provider.pk, 4, strategy="balance")
    in_database = [pool.select_account(provider.pk, [], "balance").pk for _ in range(4)]  # type: ignore[union-attr]
    assert in_memory == in_database == [a1.pk] * 4
