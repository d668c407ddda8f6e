"""One process at a time across the deployment: a lease in the database.

A lease is a row (``accounts.models.Lease``): who holds it and until when. A
process takes it when it is free or has run out, and its holder renews it well
before it runs out, each with one conditional UPDATE, which SQLite and
PostgreSQL alike apply atomically: of two processes trying at once, one updates
the row and the other finds it taken. Expiry is read and written on the
database's clock (``Now()``), so gateway hosts whose clocks disagree still agree
on who holds it. A holder that stops lets go at once (:meth:`Lease.release`);
one that dies, or stalls past its lease, is replaced when the lease runs out.

What a lease guards must still be safe to run twice: a holder that stalled past
its expiry may finish the round it was in while its successor starts one. The
pool's duties are conditional UPDATEs, so that costs repeated work, never a
wrong state.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import secrets
import socket

from django.db.models import DateTimeField, ExpressionWrapper, Q
from django.db.models.functions import Now

from accounts.models import Lease as LeaseRow

log = logging.getLogger(__name__)

_LONG_AGO = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)


def process_name() -> str:
    """This process, as a lease names its holder: host, process id and a random tag (pids are reused)."""

    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Lease:
    """A named lease as one process holds it; its methods are synchronous (run them through ``hop``)."""

    def __init__(self, name: str, ttl: float, holder: str | None = None) -> None:
        self.name = name
        self.ttl = ttl
        self.holder = holder or process_name()
        self.held = False

    def hold(self) -> bool:
        """Take the lease if it is free or has run out, renew it if it is ours; True while it is ours."""

        held = self._take()
        if not held:
            if not LeaseRow.objects.filter(name=self.name).exists():
                # No row yet (a new deployment), or it was deleted: one (free) row, whoever inserts it first.
                LeaseRow.objects.bulk_create([LeaseRow(name=self.name, expires_at=_LONG_AGO)],
                                             ignore_conflicts=True)
            # Again either way: another process may have inserted the row, free, since the first try found
            # none; without this second try the first to ask could be turned away from a lease nobody holds.
            held = self._take()
        if held != self.held:
            log.info("%s lease %s by %s", self.name, "taken" if held else "lost", self.holder)
        self.held = held
        return held

    def _take(self) -> bool:
        until = ExpressionWrapper(Now() + dt.timedelta(seconds=self.ttl), output_field=DateTimeField())
        return bool(LeaseRow.objects.filter(Q(holder=self.holder) | Q(expires_at__lt=Now()), name=self.name)
                    .update(holder=self.holder, expires_at=until))

    def release(self) -> None:
        """Let go, so another process takes over at its next try instead of when the lease runs out."""

        if self.held:
            LeaseRow.objects.filter(name=self.name, holder=self.holder).update(holder="", expires_at=_LONG_AGO)
            self.held = False
            log.info("%s lease released by %s", self.name, self.holder)

    def current(self) -> str:
        """Who holds it now ("" when nobody does)."""

        row = LeaseRow.objects.filter(name=self.name, expires_at__gte=Now()).values_list("holder", flat=True).first()
        return row or ""
