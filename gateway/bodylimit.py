"""Refuse oversized API bodies before they are read whole, in the caller's error envelope.

uvicorn hands the body over as it arrives (and stops reading the socket while
the application does not take it), so a declared length over the limit is
refused before any body byte is read, and a chunked body as soon as it passes
the limit. Daphne (Twisted) receives the whole body before it calls the
application, so there the 413 comes only once the body is in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from .asgiwrite import send_error
from .routes import RouteTable

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
App = Callable[[Scope, Any, Any], Awaitable[None]]  # an ASGI application
# How long a refused client may go on sending (discarded) before the connection is cut: closing
# at once with unread data makes the kernel answer with a reset, and the client may then lose
# the 413 it has not read yet.
DRAIN_SECONDS = 2.0


class BodyLimit:
    def __init__(self, app: App, routes: RouteTable, limit: int) -> None:
        self.app = app
        self.routes = routes
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        limit = self.limit
        length = None
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    length = None
                break
        if length is not None:
            if length > limit:
                return await self._refuse(scope, receive, send)
            return await self.app(scope, receive, send)
        # No declared length (chunked): read up to the limit ourselves, then replay.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return await self.app(scope, _replay([message]), send)
            body = message.get("body", b"")
            size += len(body)
            if size > limit:
                return await self._refuse(scope, receive, send)
            chunks.append(body)
            if not message.get("more_body", False):
                break
        replay = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]
        return await self.app(scope, _replay(replay, receive), send)

    async def _refuse(self, scope: Scope, receive: Any, send: Any) -> None:
        await send_error(send, self.routes, scope["path"], 413,
                         f"The request body exceeds the limit of {self.limit} bytes", "request_too_large",
                         [(b"access-control-allow-origin", b"*"), (b"connection", b"close")], more_body=True)
        # The answer is out; what the client still sends is dropped before the connection closes.
        try:
            async with asyncio.timeout(DRAIN_SECONDS):
                while (await receive()).get("more_body", False):
                    pass
        except TimeoutError:
            pass
        await send({"type": "http.response.body", "body": b""})


def _replay(messages: list[dict[str, Any]], receive: Receive | None = None) -> Receive:
    queue = list(messages)

    async def replay_receive() -> dict[str, Any]:
        if queue:
            return queue.pop(0)
        if receive is not None:
            return await receive()
        return {"type": "http.disconnect"}

    return replay_receive
