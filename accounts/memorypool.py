"""The account pool of a SQLite deployment, picked in memory.

SQLite serves one gateway process (it serialises writers), so that process can
own the rotation. Picking through the database cost 1–2 ms per request under
load (a worker-thread hop, then a write on a connection whose page cache every
other write had just invalidated, queued behind the request-log writer's
transaction); picking here costs microseconds and no thread.

The database stays the record. State changes (disable, cool-down, enable) are
written there by :mod:`accounts.pool` first and applied here at once (its
``state_changed`` signal); the rotation's last-used stamps are written in
batches, before every re-read and when the pool is closed; everything is re-read
every ``ttl`` seconds (``GATEWAY_POOL_TTL``), in the background, so what another
process changes (an admin in a second process, ``loadconfig``) is seen within
that. A TTL of 0 re-reads before every pick (the tests' setting: they change the
pool from outside between requests). A provider added since the last read is read
at once, not answered "no accounts": the configuration, re-read on its own schedule,
may route to it before this pool's next re-read is due.
"""

from __future__ import annotations

import datetime as dt
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from . import pickorder
from .db import DatabaseUnavailable, hop
from .models import Account, Provider
from .pool import RecordedInDatabase, end_cooldown
from .refresh import Refresh

_ONE_US = dt.timedelta(microseconds=1)
_STAMP = ("UPDATE accounts_account SET last_used_at = %s, pick_due = COALESCE(%s, pick_due)"
          " WHERE id = %s AND (last_used_at IS NULL OR last_used_at < %s)")
_NEVER = dt.datetime.min.replace(tzinfo=dt.timezone.utc)


@dataclass
class Slot:
    account: Account
    status: str
    cooldown_until: dt.datetime | None
    balance: Decimal | None
    last_used: dt.datetime | None
    due: float | None = None  # the weighted selection's virtual time
    # read for every slot of every pick: the model's ``pk`` property looks up its meta each time
    pk: int = field(init=False)

    def __post_init__(self) -> None:
        self.pk = self.account.pk


@dataclass
class _Stamp:
    last_used: dt.datetime
    due: float | None


@dataclass
class _Change:
    generation: int
    status: str
    cooldown_until: dt.datetime | None


class MemoryPool(RecordedInDatabase):
    def __init__(self, ttl: float) -> None:
        self._ttl = ttl
        self._slots: dict[int, list[Slot]] = {}  # by provider id, each list in id order
        self._providers: frozenset[int] = frozenset()  # the enabled providers of the last read
        self._refresh = Refresh(self._reread, "account pool")
        self._last_stamp = _NEVER
        self._stamps: dict[int, _Stamp] = {}  # picks not yet written to the database
        self._changes: dict[int, _Change] = {}  # state changes a reload in flight may not have read
        self._generation = itertools.count()
        self._lock = threading.Lock()  # stamps and changes come from worker threads too

    # ----------------------------------------------------------------- picking

    async def pick(self, provider_id: int, exclude: Sequence[int], strategy: str,
                   prefer: int | None = None) -> Account | None:
        await self._refresh.ensure(self._ttl)
        if provider_id not in self._providers:
            await self._refresh.ensure(0)  # newer than this pool's copy: wait for a fresh one
        now = timezone.now()
        best: Slot | None = None
        best_key: tuple[Any, ...] = ()
        slots = self._slots.get(provider_id, ())
        for slot in slots:
            if slot.pk in exclude or not pickorder.usable(slot.status, slot.cooldown_until, now):
                continue
            account = slot.account
            key = pickorder.sort_key(strategy, slot.balance, slot.last_used, slot.pk, prefer=prefer,
                                     tier=account.tier, weight=account.weight, due=slot.due)
            if best is None or key < best_key:
                best, best_key = slot, key
        if best is None:
            return None
        # Strictly increasing stamps: two picks in one clock tick still rotate.
        stamp = max(now, self._last_stamp + _ONE_US)
        self._last_stamp = best.last_used = stamp
        due = None
        if strategy == pickorder.WEIGHTED:
            lead = max((s.due for s in slots if s.due is not None), default=None)
            due = best.due = best.account.pick_due = pickorder.next_due(best.due, lead, best.account.weight)
        with self._lock:
            earlier = self._stamps.get(best.pk)
            self._stamps[best.pk] = _Stamp(stamp, due if due is not None else earlier.due if earlier else None)
        if best.status == Account.COOLING:
            best.status, best.cooldown_until = Account.ACTIVE, None
            try:
                await hop(end_cooldown, best.account, now)
            except DatabaseUnavailable:
                pass  # picked from memory while the database is away; the record follows on a later pick
        return best.account

    def keep_warm(self) -> None:
        """Have a copy no older than the TTL, re-read in the background (a stand-by pool)."""

        self._refresh.start_if_due(self._ttl)

    async def _reread(self) -> None:
        started = next(self._generation)
        providers, slots = await hop(self._load)
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
                if slot is not None and (slot.last_used is None or slot.last_used < stamp.last_used):
                    slot.last_used = stamp.last_used
                    slot.due = stamp.due if stamp.due is not None else slot.due
        by_provider: dict[int, list[Slot]] = {}
        for slot in slots.values():
            by_provider.setdefault(slot.account.provider_id, []).append(slot)
        self._slots = by_provider
        self._providers = providers

    def _load(self) -> tuple[frozenset[int], dict[int, Slot]]:
        self.flush()
        # Providers first: one read here has its accounts in the next, which come after it.
        providers = frozenset(Provider.objects.filter(enabled=True).values_list("id", flat=True))
        accounts = Account.objects.filter(provider__enabled=True).order_by("id")
        return providers, {a.pk: Slot(a, a.status, a.cooldown_until, a.balance, a.last_used_at, a.pick_due)
                           for a in accounts}

    # ----------------------------------------------------------------- the record

    def flush(self) -> None:
        """Write the picks' last-used stamps (one statement for all); kept for the next try on failure."""

        with self._lock:
            stamps, self._stamps = self._stamps, {}
        if not stamps:
            return
        ops = connection.ops
        rows = [(ops.adapt_datetimefield_value(stamp.last_used), stamp.due, pk,
                 ops.adapt_datetimefield_value(stamp.last_used)) for pk, stamp in stamps.items()]
        try:
            # Plain SQL: building an ORM update per account showed in the profile at a few a second.
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.executemany(_STAMP, rows)
        except Exception:
            with self._lock:
                for pk, stamp in stamps.items():
                    newer = self._stamps.get(pk)
                    if newer is None or newer.last_used < stamp.last_used:
                        self._stamps[pk] = stamp
            raise

    async def aclose(self) -> None:
        await hop(self.flush)

    def on_state_change(self, sender: Any, account_id: int, status: str,
                        cooldown_until: dt.datetime | None = None, **kwargs: Any) -> None:
        if self._refresh.loaded_at is None and not self._slots:
            return  # nothing picked yet: the first read will see the change
        with self._lock:
            self._changes[account_id] = _Change(next(self._generation), status, cooldown_until)
        for slots in self._slots.values():
            for slot in slots:
                if slot.pk == account_id:
                    slot.status, slot.cooldown_until = status, cooldown_until
                    return

    def invalidate(self, **kwargs: Any) -> None:
        self._refresh.invalidate()
