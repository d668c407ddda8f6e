"""Scheduled tests of accounts the pool disabled: which are due, and when the next one is.

An account disabled by a rule with ``retest_after`` (``accounts.rules``) carries
its next test time (``retest_at``) and the interval that led to it
(``retest_interval``). When the time comes, the pool's leader
(``gateway.background.poolhealth``) queues the test for the prober (``probe_requested_at``,
the admin's Test action's own queue: one mechanism for both) and schedules the
next one at twice the interval, up to a day: a test that succeeds puts the
account back (``accounts.pool.enable_account``, which clears the schedule), one
that fails leaves the next in place. An account disabled by hand has no schedule.
"""

from __future__ import annotations

import datetime as dt

from .models import Account

MAX_INTERVAL = 86400.0  # a day: a key that comes back is found within a day, however long it was out


def next_interval(interval: float) -> float:
    """The wait after a test that fails: twice the last, up to a day (a rule's own longer one stays)."""

    return max(interval, min(2 * interval, MAX_INTERVAL))


def queue_due(now: dt.datetime) -> list[int]:
    """Queue the tests that are due and schedule the next of each; returns the accounts queued.

    Each is a conditional UPDATE on the due time, so two processes doing this at once queue
    each test once.
    """

    due = Account.objects.filter(status=Account.DISABLED, disabled_by_hand=False, retest_at__lte=now)
    queued = []
    for pk, interval in list(due.values_list("pk", "retest_interval")):
        later = next_interval(interval or MAX_INTERVAL)
        if due.filter(pk=pk).update(probe_requested_at=now, retest_at=now + dt.timedelta(seconds=later),
                                    retest_interval=later):
            queued.append(pk)
    return queued
