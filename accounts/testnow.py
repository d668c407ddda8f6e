"""Test an account now, from a page, and say how it went: the process serving the page sends the probe.

The dashboard imports nothing of the gateway's, so it asks through :data:`test_requested`
(``await test_requested.asend(sender=Account, account_id=...)``). A gateway process connects its
prober (``gateway.background.prober.Prober.test_now``), which sends the one probe request the
background tests send (``gateway.background.probe``) through the app's upstream client and records
the outcome on the account as they do: a success puts a pool-disabled account back. Its answer has
``ok``, ``status``, ``summary`` and ``latency_ms``.

A process that serves pages but runs no gateway (``manage.py runserver``) has no receiver: the page
then queues the test for a gateway process (:func:`queue`), as the admin's Test action does.
"""

from __future__ import annotations

from typing import Protocol

from django.dispatch import Signal
from django.utils import timezone

from .models import Account

# Sent with account_id; a receiver answers with a TestOutcome. Async receivers: the probe runs on the
# loop of the process's upstream client, which is the server's, where an async page view runs too.
test_requested = Signal()


class TestOutcome(Protocol):
    @property
    def ok(self) -> bool: ...

    @property
    def status(self) -> int | None: ...

    @property
    def summary(self) -> str: ...

    @property
    def latency_ms(self) -> int | None: ...


def queue(account_id: int) -> bool:
    """Mark the account for the background prober (the admin's Test action's queue); False if it is gone."""

    return bool(Account.objects.filter(pk=account_id).update(probe_requested_at=timezone.now()))
