"""A pool-disabled account is tested again on its rule's schedule; a failed test waits twice as long."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from accounts import pool, retests
from accounts.models import Account
from tests.accounts.pools import make_pool

pytestmark = pytest.mark.django_db(transaction=True)

HOUR = 3600.0


def disable(account: Account, retest_after: float | None = HOUR, **kw: object) -> None:
    assert pool.disable_account(account.pk, rule="auth_invalid", tier="auth_invalid", status_code=401,
                                excerpt="", retest_after=retest_after, **kw)  # type: ignore[arg-type]


def test_a_disabled_account_is_scheduled_by_its_rule_and_a_cooling_one_is_not() -> None:
    _, (a, b, c) = make_pool(3)
    before = timezone.now()
    disable(a)
    disable(b, cooldown_until=before + dt.timedelta(seconds=30))  # its cool-down's end is its test
    disable(c, retest_after=None)  # a rule without retest_after: ops decide
    a.refresh_from_db(), b.refresh_from_db(), c.refresh_from_db()
    assert a.retest_interval == HOUR and a.retest_at is not None
    assert dt.timedelta(seconds=HOUR - 1) < a.retest_at - before < dt.timedelta(seconds=HOUR + 5)
    assert (b.retest_at, c.retest_at) == (None, None)


def test_a_due_test_is_queued_once_and_the_next_scheduled_at_twice_the_interval() -> None:
    _, (due, later) = make_pool(2)
    disable(due), disable(later)
    now = timezone.now() + dt.timedelta(seconds=HOUR + 1)  # the first is due, the second not yet
    Account.objects.filter(pk=later.pk).update(retest_at=now + dt.timedelta(minutes=1))
    assert retests.queue_due(now) == [due.pk]
    assert retests.queue_due(now) == []  # another process's round at the same moment finds nothing due
    due.refresh_from_db(), later.refresh_from_db()
    assert due.probe_requested_at == now and later.probe_requested_at is None
    assert due.retest_interval == 2 * HOUR and due.retest_at == now + dt.timedelta(hours=2)
    assert due.status == Account.DISABLED  # queued for the prober, not put back


def test_accounts_disabled_by_hand_or_back_in_the_pool_are_never_queued() -> None:
    _, (by_hand, enabled) = make_pool(2)
    disable(by_hand), disable(enabled)
    assert pool.disable_by_hand(by_hand.pk)
    assert pool.enable_account(enabled.pk, how="probe")
    by_hand.refresh_from_db(), enabled.refresh_from_db()
    assert (by_hand.retest_at, enabled.retest_at, enabled.retest_interval) == (None, None, None)
    assert retests.queue_due(timezone.now() + dt.timedelta(days=30)) == []


def test_the_wait_doubles_up_to_a_day_and_a_longer_rule_keeps_its_own() -> None:
    waits = [600.0]
    for _ in range(9):
        waits.append(retests.next_interval(waits[-1]))
    assert waits == [600, 1200, 2400, 4800, 9600, 19200, 38400, 76800, 86400, 86400]
    assert retests.next_interval(2 * 86400) == 2 * 86400


def test_the_migration_schedules_accounts_the_pool_disabled_before_retests_existed() -> None:
    import importlib

    from django.apps import apps

    from accounts.models import DisableEvent

    migration = importlib.import_module("accounts.migrations.0013_schedule_disabled_accounts")
    _, (revoked, exhausted, by_hand, unscheduled) = make_pool(4)
    now = timezone.now()
    for account, rule, status, ago in ((revoked, "auth_invalid", 401, 2 * HOUR), (exhausted, "exhausted", 402, 60),
                                       (by_hand, "auth_invalid", 401, 0), (unscheduled, "request_too_large", 403, 0)):
        Account.objects.filter(pk=account.pk).update(status=Account.DISABLED, disabled_by_hand=account is by_hand)
        DisableEvent.objects.create(account=account, rule=rule, tier=rule, status_code=status,
                                    created_at=now - dt.timedelta(seconds=ago))
    migration.schedule(apps, None)
    schedules = {a.pk: (a.retest_at, a.retest_interval) for a in Account.objects.all()}
    overdue_at, interval = schedules[revoked.pk]
    assert interval == HOUR and now <= overdue_at < timezone.now() + dt.timedelta(seconds=1)  # due now
    assert schedules[exhausted.pk] == (now - dt.timedelta(seconds=60) + dt.timedelta(hours=6), 6 * HOUR)
    assert schedules[by_hand.pk] == schedules[unscheduled.pk] == (None, None)
