"""The dashboard's websocket: staff only, joined to the pool's event group, one handler per event type."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from accounts.events import group

from . import live

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
        """The page only listens; anything it sends is ignored."""

    async def pool_event(self, event: dict[str, Any]) -> None:
        """``{"type": "pool.event", "kind": ..., "payload": ...}`` from ``accounts.events``."""

        build = live.BUILDERS.get(event.get("kind", ""))
        if build is None:
            return
        await self.send_json(await _build(build, event.get("payload") or {}))


@database_sync_to_async
def _build(build: Callable[[dict[str, Any]], dict[str, Any]], payload: dict[str, Any]) -> dict[str, Any]:
    return build(payload)
