"""The pool's duties run in one process at a time: cool-downs end at their time, due tests are queued."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
from django.utils import timezone

from accounts import pool
from accounts.models import Account, DisableEvent
from gateway.background.lease import Lease
from gateway.background.poolhealth import PoolHealth
from tests.accounts.pools import make_pool

pytestmark = pytest.mark.django_db(transaction=True)


def process(name: str, ttl: float = 30.0) -> tuple[PoolHealth, list[str]]:
    """One gateway process's duties, and the wake-ups its prober got."""

    woken: list[str] = []
    return PoolHealth(Lease("pool-health", ttl, name), lambda: woken.append(name)), woken


def past(seconds: float = 1.0) -> dt.datetime:
    return timezone.now() - dt.timedelta(seconds=seconds)


def test_the_holder_ends_cooldowns_that_are_over_and_queues_due_tests_and_no_other_process_does() -> None:
    _, (cooling, disabled, waiting) = make_pool(3)
    pool.disable_account(cooling.pk, rule="exhausted", tier="tier3", status_code=429, excerpt="",
                         cooldown_until=timezone.now() + dt.timedelta(minutes=1))
    for account in (disabled, waiting):
        pool.disable_account(account.pk, rule="auth_invalid", tier="auth_invalid", status_code=401, excerpt="",
                             retest_after=3600)
    (a, woken_a), (b, woken_b) = process("a"), process("b")
    assert asyncio.run(a.run_once())
    assert not asyncio.run(b.run_once())  # a holds the lease
    assert Account.objects.get(pk=cooling.pk).status == Account.COOLING  # not over yet: untouched
    assert woken_a == [] and not Account.objects.filter(probe_requested_at__isnull=False).exists()

    Account.objects.filter(pk=cooling.pk).update(cooldown_until=past())
    Account.objects.filter(pk=disabled.pk).update(retest_at=past())
    assert not asyncio.run(b.run_once())
    assert Account.objects.get(pk=cooling.pk).status == Account.COOLING  # b did nothing
    assert asyncio.run(a.run_once())
    assert Account.objects.get(pk=cooling.pk).status == Account.ACTIVE
    assert DisableEvent.objects.get(account=cooling).ended_by == "cooldown"
    queued = Account.objects.filter(probe_requested_at__isnull=False).values_list("pk", flat=True)
    assert list(queued) == [disabled.pk] and woken_a == ["a"] and woken_b == []


def test_when_the_holder_stops_another_process_takes_over_at_its_next_round() -> None:
    (a, _), (b, _) = process("a"), process("b")
    assert asyncio.run(a.run_once()) and not asyncio.run(b.run_once())
    asyncio.run(a.aclose())
    assert asyncio.run(b.run_once()) and not asyncio.run(a.run_once())


def test_when_the_holder_dies_another_takes_over_once_its_lease_runs_out() -> None:
    (a, _), (b, _) = process("a", ttl=0.3), process("b", ttl=0.3)
    assert asyncio.run(a.run_once())  # ...and then a is killed: it never renews nor releases
    assert not asyncio.run(b.run_once())
    asyncio.run(asyncio.sleep(0.4))
    assert asyncio.run(b.run_once())


def test_rounds_come_often_enough_to_renew_the_lease_before_it_runs_out() -> None:
    assert PoolHealth(Lease("x", 10.0)).tick == 1.0
    assert PoolHealth(Lease("x", 1.5)).tick == 0.5


def test_a_round_that_fails_does_not_end_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    health, _ = process("a")
    rounds: list[int] = []

    async def failing() -> bool:
        rounds.append(1)
        if len(rounds) < 3:
            raise RuntimeError("the database is away")
        raise asyncio.CancelledError

    monkeypatch.setattr(health, "run_once", failing)
    health.tick = 0.01
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(health.run())
    assert len(rounds) == 3
