"""The account pool: the interface a request picks through, and the pool's state changes.

A pick is made by a :class:`Pool` that the gateway's app object owns. There are
two, one per database, both implementing the one written spec of
:mod:`accounts.pickorder`:

- :class:`accounts.memorypool.MemoryPool` (SQLite): a SQLite database serves one
  gateway process, so that process owns the rotation and picks in memory;
- :class:`accounts.pgpool.PgPool` (PostgreSQL): one round trip per pick, exact
  across any number of processes.

Each state change below writes the database first, with its audit row, and after
commit broadcasts to the dashboard and sends :data:`state_changed`, which every
pool of this process hears (a memory pool must stop picking a disabled account at
once, not at its next re-read).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any, Protocol

from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from . import events
from .db import DatabaseUnavailable, hop
from .models import Account, DisableEvent

log = logging.getLogger(__name__)

# Sent after commit with account_id, status and cooldown_until.
state_changed = Signal()


class Pool(Protocol):
    async def pick(self, provider_id: int, exclude: Sequence[int], strategy: str,
                   prefer: int | None = None) -> Account | None:
        """The next usable account of the provider (stamped as used), or None when none is;
        ``prefer``: the session's account, picked whenever it is usable (``accounts.pickorder``)."""

    async def disable(self, account_id: int, *, rule: str, tier: str, status_code: int | None, excerpt: str,
                      cooldown_until: dt.datetime | None = None, retest_after: float | None = None) -> bool:
        """:func:`disable_account`, from async code."""

    def on_state_change(self, sender: Any, account_id: int, status: str,
                        cooldown_until: dt.datetime | None, **kwargs: Any) -> None:
        """A state change the database has just committed (a :data:`state_changed` receiver)."""

    def invalidate(self, **kwargs: Any) -> None:
        """Accounts or providers were added, edited or removed in this process."""

    def flush(self) -> None:
        """Write what the pool holds back (synchronous: at exit, or on a worker thread)."""

    async def aclose(self) -> None:
        """Write what is held back and let go of connections (the gateway stopping)."""


class RecordedInDatabase:
    """The state changes both pools make the same way: in the database, which then tells every pool."""

    async def disable(self, account_id: int, *, rule: str, tier: str, status_code: int | None, excerpt: str,
                      cooldown_until: dt.datetime | None = None, retest_after: float | None = None) -> bool:
        try:
            return await hop(disable_account, account_id, rule=rule, tier=tier, status_code=status_code,
                             excerpt=excerpt, cooldown_until=cooldown_until, retest_after=retest_after)
        except DatabaseUnavailable:
            # Not recorded (the database is away): at least this process stops picking it. Its next
            # failure once the database is back records it.
            log.warning("account %s not disabled in the database (unreachable); out of this process's pool",
                        account_id)
            self.on_state_change(Account, account_id=account_id, status=Account.DISABLED, cooldown_until=None)
            return False

    def on_state_change(self, sender: Any, account_id: int, status: str,
                        cooldown_until: dt.datetime | None = None, **kwargs: Any) -> None:
        raise NotImplementedError


def _changed(account_id: int, status: str, cooldown_until: dt.datetime | None = None) -> None:
    transaction.on_commit(lambda: state_changed.send(sender=Account, account_id=account_id, status=status,
                                                     cooldown_until=cooldown_until))


def end_cooldown(account: Account, now: dt.datetime) -> None:
    """A cooling account whose cool-down is over was picked: it is active again, its event closed."""

    with transaction.atomic():
        _end_cooldown(account.pk, now)
        _changed(account.pk, Account.ACTIVE)  # even if another process ended it: this one picked it
    account.status, account.cooldown_until = Account.ACTIVE, None


def end_due_cooldowns(now: dt.datetime) -> list[int]:
    """Every cool-down that is over ends now, picked or not (the pool's leader calls this each second).

    Each account as if it had been picked: active, its event closed as ended by "cooldown", the
    dashboard told, and every pool of this process too. Returns the accounts it ended.
    """

    due = Account.objects.filter(status=Account.COOLING, cooldown_until__lte=now).values_list("pk", flat=True)
    ended = []
    for pk in list(due):
        with transaction.atomic():
            if _end_cooldown(pk, now):
                _changed(pk, Account.ACTIVE)
                ended.append(pk)
    return ended


def _end_cooldown(account_id: int, now: dt.datetime) -> bool:
    """Active again if still cooling and due (a conditional UPDATE: once, whoever gets there first)."""

    if not Account.objects.filter(pk=account_id, status=Account.COOLING, cooldown_until__lte=now).update(
            status=Account.ACTIVE, cooldown_until=None):
        return False
    _close_events(account_id, "cooldown", now)
    return True


def _close_events(account_id: int, how: str, now: dt.datetime) -> None:
    DisableEvent.objects.filter(account_id=account_id, ended_at__isnull=True).update(ended_at=now, ended_by=how)
    transaction.on_commit(lambda: events.publish("account.enabled", {"account_id": account_id, "how": how}))


def disable_account(account_id: int, *, rule: str, tier: str, status_code: int | None,
                    excerpt: str, cooldown_until: dt.datetime | None = None,
                    retest_after: float | None = None) -> bool:
    """Disable (or cool down) an account once; False when it already was.

    The conditional UPDATE makes concurrent failures of the same account write
    exactly one DisableEvent, on any number of gateway processes. A disabled
    account (not a cooling one: its cool-down's end is its test) is scheduled for
    a test ``retest_after`` seconds from now, when its rule gives one.
    """

    now = timezone.now()
    new_status = Account.COOLING if cooldown_until else Account.DISABLED
    retest_at = now + dt.timedelta(seconds=retest_after) if retest_after and not cooldown_until else None
    with transaction.atomic():
        changed = Account.objects.filter(pk=account_id, status=Account.ACTIVE).update(
            status=new_status, cooldown_until=cooldown_until, retest_at=retest_at,
            retest_interval=retest_after if retest_at else None,
        )
        if not changed:
            # Out of the pool already (perhaps changed by another process): stop picking it here too.
            _changed(account_id, Account.DISABLED)
            return False
        _changed(account_id, new_status, cooldown_until)
        event = DisableEvent.objects.create(
            account_id=account_id, created_at=now, rule=rule, tier=tier,
            status_code=status_code, excerpt=excerpt, cooldown_until=cooldown_until,
        )
        payload = {"account_id": account_id, "event_id": event.pk, "tier": tier, "rule": rule,
                   "status_code": status_code, "cooldown_until": cooldown_until.isoformat() if cooldown_until else None}
        transaction.on_commit(lambda: events.publish("account.disabled", payload))
    log.info("account %s disabled (%s, %s)", account_id, tier, status_code)
    return True


def enable_account(account_id: int, how: str = "hand") -> bool:
    """Make an account usable again and close its open DisableEvents as ended ``how``.

    Only ``how="hand"`` may re-enable an account that was disabled by hand. False
    when nothing changed (already active, gone, or disabled by hand).
    """

    now = timezone.now()
    with transaction.atomic():
        account = Account.objects.select_for_update().filter(pk=account_id).first()
        if account is None or account.status == Account.ACTIVE and not account.disabled_by_hand:
            return False
        if account.disabled_by_hand and how != "hand":
            return False
        account.status, account.cooldown_until, account.disabled_by_hand = Account.ACTIVE, None, False
        account.retest_at = account.retest_interval = None
        account.save(update_fields=["status", "cooldown_until", "disabled_by_hand", "retest_at", "retest_interval"])
        _close_events(account_id, how, now)
        _changed(account_id, Account.ACTIVE)
    return True


def disable_by_hand(account_id: int, reason: str = "") -> bool:
    """Take an account out of the pool until ops put it back; False when it already was out by hand.
    ``reason``: what ops wrote, kept as the event's excerpt (the "why disabled" of the dashboard).

    An event the pool opened earlier stays open: it still says why the account first failed. Its
    scheduled test is dropped: only ops bring this account back.
    """

    with transaction.atomic():
        changed = Account.objects.filter(pk=account_id, disabled_by_hand=False).update(
            status=Account.DISABLED, disabled_by_hand=True, cooldown_until=None, retest_at=None,
            retest_interval=None)
        if not changed:
            return False
        _changed(account_id, Account.DISABLED)
        event = DisableEvent.objects.create(account_id=account_id, rule="manual", tier="manual", excerpt=reason)
        payload = {"account_id": account_id, "event_id": event.pk, "tier": "manual", "rule": "manual",
                   "status_code": None, "cooldown_until": None}
        transaction.on_commit(lambda: events.publish("account.disabled", payload))
    return True
