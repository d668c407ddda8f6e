"""The account pool of a SQLite deployment, picked in memory.

SQLite serves one gateway process (it serialises writers), so that process can
own the rotation. Picking through the database cost 1–2 ms per request under
load (a worker-thread hop, then a write on a connection whose page cache every
other write had just invalidated, queued behind the request-log writer's
transaction); picking here costs microseconds and no thread.

The database stays the record. State changes (disable, cool-down, enable) are
written there by :mod:`accounts.pool` first and applied here at once; the
rotation's last-used stamps are written in batches, with the request log's
(``gateway.reqlog``) and before every re-read; everything is re-read every
``GATEWAY_POOL_TTL`` seconds, in the background, so what another process
changes (an admin in a second process, ``loadconfig``) is seen within that.
A TTL of 0 re-reads before every pick (the tests' setting: they change the pool
from outside between requests).
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import threading
from dataclasses import dataclass
from decimal import Decimal

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.signals import setting_changed
from django.db import connection, transaction
from django.dispatch import receiver
from django.utils import timezone

from .models import Account
from .refresh import Refresh

_ONE_US = dt.timedelta(microseconds=1)
_STAMP = ("UPDATE accounts_account SET last_used_at = %s"
          " WHERE id = %s AND (last_used_at IS NULL OR last_used_at < %s)")
_NEVER = dt.datetime.min.replace(tzinfo=dt.timezone.utc)


@dataclass
class Slot:
    account: Account
    status: str
    cooldown_until: dt.datetime | None
    balance: Decimal | None
    last_used: dt.datetime | None

    def usable(self, now: dt.datetime) -> bool:
        return self.status == Account.ACTIVE or (
            self.status == Account.COOLING and self.cooldown_until is not None and self.cooldown_until <= now)


@dataclass
class _Change:
    generation: int
    status: str
    cooldown_until: dt.datetime | None


class LocalPool:
    def __init__(self) -> None:
        self._slots: dict[int, list[Slot]] = {}  # by provider id, each list in id order
        self._refresh = Refresh(self._reread, "account pool")
        self._last_stamp = _NEVER
        self._stamps: dict[int, dt.datetime] = {}  # picks not yet written to the database
        self._changes: dict[int, _Change] = {}  # state changes a reload in flight may not have read
        self._generation = itertools.count()
        self._lock = threading.Lock()  # stamps and changes come from worker threads too

    # ----------------------------------------------------------------- picking

    async def select(self, provider_id: int, exclude: list[int], strategy: str) -> Account | None:
        await self._refresh.ensure(_ttl())
        now = timezone.now()
        best: Slot | None = None
        for slot in self._slots.get(provider_id, ()):
            if slot.account.pk in exclude or not slot.usable(now):
                continue
            if best is None or _before(slot, best, strategy):
                best = slot
        if best is None:
            return None
        # Strictly increasing stamps: two picks in one clock tick still rotate.
        stamp = max(now, self._last_stamp + _ONE_US)
        self._last_stamp = best.last_used = stamp
        with self._lock:
            self._stamps[best.account.pk] = stamp
        if best.status == Account.COOLING:
            from . import pool

            best.status, best.cooldown_until = Account.ACTIVE, None
            await sync_to_async(pool.end_cooldown, thread_sensitive=False)(best.account, now)
        return best.account

    async def _reread(self) -> None:
        started = next(self._generation)
        slots = await sync_to_async(self._load, thread_sensitive=False)()
        with self._lock:
            # A change applied while the rows were read may be missing from them: apply it again.
            for pk, change in list(self._changes.items()):
                slot = slots.get(pk)
                if change.generation >= started and slot is not None:
                    slot.status, slot.cooldown_until = change.status, change.cooldown_until
                elif change.generation < started:
                    del self._changes[pk]
            for pk, stamp in self._stamps.items():  # picked since the stamps were written
                slot = slots.get(pk)
                if slot is not None and (slot.last_used is None or slot.last_used < stamp):
                    slot.last_used = stamp
        by_provider: dict[int, list[Slot]] = {}
        for slot in slots.values():
            by_provider.setdefault(slot.account.provider_id, []).append(slot)
        self._slots = by_provider

    def _load(self) -> dict[int, Slot]:
        self.write_stamps()
        accounts = Account.objects.filter(provider__enabled=True).order_by("id")
        return {a.pk: Slot(a, a.status, a.cooldown_until, a.balance, a.last_used_at) for a in accounts}

    # ----------------------------------------------------------------- the record

    def write_stamps(self) -> None:
        """Write the picks' last-used stamps (one statement for all); kept for the next try on failure."""

        with self._lock:
            stamps, self._stamps = self._stamps, {}
        if not stamps:
            return
        ops = connection.ops
        rows = [(ops.adapt_datetimefield_value(stamp), pk, ops.adapt_datetimefield_value(stamp))
                for pk, stamp in stamps.items()]
        try:
            # Plain SQL: building an ORM update per account showed in the profile at a few a second.
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.executemany(_STAMP, rows)
        except Exception:
            with self._lock:
                for pk, stamp in stamps.items():
                    if self._stamps.get(pk, _NEVER) < stamp:
                        self._stamps[pk] = stamp
            raise

    def apply(self, account_id: int, status: str, cooldown_until: dt.datetime | None = None) -> None:
        """A state change the database has just recorded: picks see it from now on."""

        if self._refresh.loaded_at is None and not self._slots:
            return  # not in use in this process (PostgreSQL, or nothing picked yet)
        with self._lock:
            self._changes[account_id] = _Change(next(self._generation), status, cooldown_until)
        for slots in self._slots.values():
            for slot in slots:
                if slot.account.pk == account_id:
                    slot.status, slot.cooldown_until = status, cooldown_until
                    return

    def invalidate(self) -> None:
        """Accounts were added, removed or edited here: re-read before the next pick."""

        self._refresh.invalidate()


@functools.cache
def _ttl() -> float:
    # Read once (a settings lookup per pick showed in the profile); override_settings clears it.
    return float(settings.GATEWAY_POOL_TTL)


@receiver(setting_changed)
def _setting_changed(setting: str, **kwargs: object) -> None:
    if setting == "GATEWAY_POOL_TTL":
        _ttl.cache_clear()


def _before(a: Slot, b: Slot, strategy: str) -> bool:
    """Whether ``a`` is picked before ``b``: the order of the database pick (balance first, then LRU, then id)."""

    if strategy == "balance" and a.balance != b.balance:
        if a.balance is None or b.balance is None:
            return b.balance is None
        return a.balance > b.balance
    if a.last_used != b.last_used:
        if a.last_used is None or b.last_used is None:
            return a.last_used is None
        return a.last_used < b.last_used
    return a.account.pk < b.account.pk


local_pool = LocalPool()
