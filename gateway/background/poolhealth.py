"""The pool heals itself: cool-downs end at their time, disabled accounts are tested on schedule.

Each gateway process runs :class:`PoolHealth`; the one that holds the
``pool-health`` lease (:mod:`gateway.background.lease`) does the work, every second:

- every cool-down that is over ends (``accounts.pool.end_due_cooldowns``): the
  account is active, its event closed as ended by "cooldown", the dashboard told
  (``account.enabled``), and every pool of this process at once; other processes'
  pools see it at their next read (at once on PostgreSQL, within
  ``GATEWAY_POOL_TTL`` in a SQLite process's memory pool);
- every scheduled test that is due is queued for the prober
  (``accounts.retests.queue_due``), and this process's prober is woken to run it
  now; an account that answers is put back with its event ended by "probe".

Without this a cool-down ended only when a request next picked the account, and a
disabled account stayed out until someone acted. Picks still end a cool-down that
is over when they find one first (the leader may be a second late, or restarting).

Measured with 10,000 accounts (1,000 cooling, 1,000 disabled): a round with nothing
due took about 1 ms of database time on SQLite and on PostgreSQL, the lease's renewal
0.2 ms and 4 ms (a commit) — no index on ``cooldown_until`` or ``retest_at``, which
every pick's last-used write would pay for on PostgreSQL. Ending 1,000 cool-downs at
once took 2–3 s: a transaction each, with its event and broadcast, as a pick's is.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from django.utils import timezone

from accounts import pool, retests
from accounts.db import hop, rounds

from .lease import Lease

log = logging.getLogger(__name__)

LEASE_NAME = "pool-health"
TICK = 1.0  # seconds between rounds: a cool-down ends within this of its time


def due_work(now: dt.datetime) -> tuple[list[int], list[int]]:
    """One round's database work: (cool-downs ended, tests queued)."""

    return pool.end_due_cooldowns(now), retests.queue_due(now)


class PoolHealth:
    def __init__(self, lease: Lease, on_queued: Callable[[], None] = lambda: None, tick: float = TICK) -> None:
        """``on_queued``: called when tests were queued (the app wakes its prober)."""

        self.lease = lease
        self.on_queued = on_queued
        # Renewed several times within its lifetime, so one slow round does not lose it.
        self.tick = min(tick, lease.ttl / 3)

    async def run(self) -> None:
        """Until cancelled: a round every tick."""

        await rounds(self.run_once, self.tick, "pool health")

    async def run_once(self) -> bool:
        """One round, if this process holds the lease (taking it if free); True when it did the work."""

        if not await hop(self.lease.hold):
            return False
        ended, queued = await hop(due_work, timezone.now())
        if ended:
            log.info("cool-down over for account(s) %s: back in the pool", ended)
        if queued:
            log.info("scheduled test queued for account(s) %s", queued)
            self.on_queued()
        return True

    async def aclose(self) -> None:
        """Let go of the lease (the process stopping): another process takes over at its next round."""

        try:
            await hop(self.lease.release)
        except Exception:  # noqa: BLE001 - stopping anyway; the lease runs out by itself
            log.warning("pool health lease not released; it runs out in %.0f s", self.lease.ttl, exc_info=True)
