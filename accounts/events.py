"""Live pool events for the dashboard, sent to one channel-layer group.

Publishing never fails the caller: a dashboard that is down must not break a
request or an account state change.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

log = logging.getLogger(__name__)


def group() -> str:
    """One group per deployment; its name is configurable so that several deployments (or test
    runs) sharing one Redis do not see each other's events."""

    return str(settings.GATEWAY_EVENTS_GROUP)


def publish(kind: str, payload: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group(), {"type": "pool.event", "kind": kind, "payload": payload})
    except Exception:  # noqa: BLE001 - see module docstring
        log.warning("dashboard event %s not delivered", kind, exc_info=True)


async def apublish(kind: str, payload: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(group(), {"type": "pool.event", "kind": kind, "payload": payload})
    except Exception:  # noqa: BLE001 - see module docstring
        log.warning("dashboard event %s not delivered", kind, exc_info=True)
