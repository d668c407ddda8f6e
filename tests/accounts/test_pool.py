"""What every pool does (the memory pool, and on PostgreSQL the PostgreSQL pool), and the pool's state changes."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections import Counter
from decimal import Decimal

import pytest
from django.db import connection
from django.utils import timezone

from accounts import pool
from accounts.models import Account, DisableEvent
from accounts.pgpool import PgPool
from tests.accounts.pools import KINDS, make_pool, new_pool, picks, run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_lru_rotates_through_every_account(kind: str) -> None:
    provider, accounts = make_pool(3)
    picked = picks(new_pool(kind), provider.pk, 6)
    assert picked[:3] == [a.pk for a in accounts]
    assert picked[3:] == picked[:3]


def test_selection_skips_tried_disabled_and_cooling_accounts(kind: str) -> None:
    provider, (a0, a1, a2, a3) = make_pool(4)
    Account.objects.filter(pk=a1.pk).update(status=Account.DISABLED)
    Account.objects.filter(pk=a2.pk).update(status=Account.COOLING,
                                            cooldown_until=timezone.now() + dt.timedelta(hours=1))
    assert picks(new_pool(kind), provider.pk, 1, exclude=[a0.pk]) == [a3.pk]
    assert picks(new_pool(kind), provider.pk, 1, exclude=[a0.pk, a3.pk]) == [None]


def test_balance_strategy_prefers_the_richest_account(kind: str) -> None:
    provider, (a0, a1, a2) = make_pool(3, "balance")
    Account.objects.filter(pk=a0.pk).update(balance=Decimal("1"))
    Account.objects.filter(pk=a1.pk).update(balance=Decimal("50"))
    assert picks(new_pool(kind), provider.pk, 3, strategy="balance") == [a1.pk] * 3


def test_a_cooldown_that_is_over_is_picked_and_ended_in_the_database(kind: str) -> None:
    provider, (a0,) = make_pool(1)
    until = timezone.now() + dt.timedelta(seconds=30)
    assert pool.disable_account(a0.pk, rule="exhausted", tier="tier3", status_code=429, excerpt="x",
                                cooldown_until=until)
    assert not pool.disable_account(a0.pk, rule="exhausted", tier="tier3", status_code=429, excerpt="x")
    assert DisableEvent.objects.count() == 1
    assert picks(new_pool(kind), provider.pk, 1) == [None]  # still cooling
    Account.objects.filter(pk=a0.pk).update(cooldown_until=timezone.now() - dt.timedelta(seconds=1))
    assert picks(new_pool(kind), provider.pk, 1) == [a0.pk]
    a0.refresh_from_db()
    assert a0.status == Account.ACTIVE and a0.cooldown_until is None
    event = DisableEvent.objects.get()
    assert event.ended_by == "cooldown" and event.ended_at is not None


def test_an_account_disabled_by_hand_is_never_picked_until_enabled_by_hand(kind: str) -> None:
    provider, (a0,) = make_pool(1)
    pool.disable_by_hand(a0.pk)
    Account.objects.filter(pk=a0.pk).update(cooldown_until=timezone.now() - dt.timedelta(days=1))
    assert picks(new_pool(kind), provider.pk, 1) == [None]
    assert pool.enable_account(a0.pk, how="hand")
    assert picks(new_pool(kind), provider.pk, 1) == [a0.pk]


def test_a_pick_never_returns_an_account_disabled_meanwhile(kind: str) -> None:
    provider, (a0, a1) = make_pool(2)
    p = new_pool(kind, ttl=60)

    async def work() -> list[int]:
        first = await p.pick(provider.pk, [], "lru")  # loaded, a0 picked
        assert first is not None
        await asyncio.to_thread(pool.disable_account, a0.pk, rule="exhausted", tier="tier3", status_code=429,
                                excerpt="")
        return [(await p.pick(provider.pk, [], "lru")).pk for _ in range(3)]  # type: ignore[union-attr]

    assert run(p, work) == [a1.pk] * 3


@pytest.mark.skipif(connection.vendor != "postgresql", reason="several processes share a pool on PostgreSQL")
def test_concurrent_picks_of_several_processes_stay_exactly_least_recently_used() -> None:
    # Eight event loops in eight threads, each with its own pool and connections: eight processes.
    provider, accounts = make_pool(5)
    counts: Counter[int] = Counter()
    start = threading.Barrier(8)

    def process() -> None:
        chosen = picks_after(start, provider.pk)
        counts.update(chosen)

    def picks_after(barrier: threading.Barrier, provider_id: int) -> list[int]:
        barrier.wait()
        return [p for p in picks(PgPool(connections=2), provider_id, 25) if p is not None]

    threads = [threading.Thread(target=process) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(counts.values()) == [40] * 5


def test_a_cooldown_that_is_over_ends_without_a_pick_and_every_pool_of_the_process_hears_it() -> None:
    _, (due, later, disabled) = make_pool(3)
    now = timezone.now()
    for account, until in ((due, now + dt.timedelta(seconds=5)), (later, now + dt.timedelta(minutes=5))):
        assert pool.disable_account(account.pk, rule="exhausted", tier="tier3", status_code=429, excerpt="x",
                                    cooldown_until=until)
    assert pool.disable_account(disabled.pk, rule="auth_invalid", tier="auth_invalid", status_code=401, excerpt="")
    heard: list[tuple[int, str]] = []

    def hear(sender: object, account_id: int, status: str, **kwargs: object) -> None:
        heard.append((account_id, status))

    pool.state_changed.connect(hear)
    try:
        assert pool.end_due_cooldowns(now) == []
        at = now + dt.timedelta(seconds=5)
        assert pool.end_due_cooldowns(at) == [due.pk]
        assert pool.end_due_cooldowns(at) == []  # once, whoever gets there first
    finally:
        pool.state_changed.disconnect(hear)
    assert heard == [(due.pk, Account.ACTIVE)]
    statuses = dict(Account.objects.values_list("pk", "status"))
    assert statuses == {due.pk: Account.ACTIVE, later.pk: Account.COOLING, disabled.pk: Account.DISABLED}
    event = DisableEvent.objects.get(account=due)
    assert (event.ended_by, event.ended_at) == ("cooldown", at)
    assert DisableEvent.objects.filter(ended_at__isnull=True).count() == 2
