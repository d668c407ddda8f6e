"""Alerts written in the transaction of the state change they report (``accounts.pool``)."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models.signals import post_save

log = logging.getLogger(__name__)


def on_disable_event(sender: Any, instance: Any, created: bool, raw: bool = False, **kwargs: Any) -> None:
    if not created or raw:
        return
    from .events import account_disabled, enqueue

    try:
        # A savepoint in the disable's transaction: written with it, or (failing) rolled back alone.
        with transaction.atomic():
            enqueue(account_disabled(instance))
    except Exception:  # noqa: BLE001 - the disable itself must go through whatever the alerts do
        log.exception("alerts for disable event %s not queued", instance.pk)


def connect() -> None:
    from accounts.models import DisableEvent

    post_save.connect(on_disable_event, sender=DisableEvent, dispatch_uid="alerts.disable_event")
