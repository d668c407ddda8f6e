"""The dashboard's websocket: staff only, joined to the pool's event group, one handler per event type."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from accounts.events import group

from . import live

OVERVIEW_EVERY = 1.0  # seconds
FORBIDDEN = 4403  # an application close code: "HTTP 403" in the 4000–4999 range


class DashboardConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if not (user is not None and user.is_authenticated and user.is_active and user.is_staff):
            # Accept, then close with our code: a handshake refused outright reaches the page as a
            # bare 1006, which it cannot tell from a network failure (and would retry for ever).
            await self.accept()
            await self.close(code=FORBIDDEN)
            return
        await self.channel_layer.group_add(group(), self.channel_name)
        await self.accept()
        await self.send_json({"kind": "hello"})

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(group(), self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """The overview says which window it shows (``{"watch": "overview", "window": "24h"}``) to be
        sent its figures as they change; anything else a page sends is ignored."""

        if isinstance(content, dict) and content.get("watch") == "overview":
            self.overview_window: str | None = str(content.get("window") or "")
            self.overview_sent = 0.0

    async def pool_event(self, event: dict[str, Any]) -> None:
        """``{"type": "pool.event", "kind": ..., "payload": ...}`` from ``accounts.events``."""

        build = live.BUILDERS.get(event.get("kind", ""))
        if build is None:
            return
        message = await _build(build, event.get("payload") or {})
        window = getattr(self, "overview_window", None)
        # Each process's log writer reports once a second: the figures follow at most as often.
        if window is not None and time.monotonic() - self.overview_sent >= OVERVIEW_EVERY:
            self.overview_sent = time.monotonic()
            message["overview"] = await database_sync_to_async(live.overview)(window)
        await self.send_json(message)


@database_sync_to_async
def _build(build: Callable[[dict[str, Any]], dict[str, Any]], payload: dict[str, Any]) -> dict[str, Any]:
    return build(payload)
