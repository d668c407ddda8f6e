"""Refuse oversized API bodies before they are read whole, in the caller's error envelope.

uvicorn hands the body over as it arrives (and stops reading the socket while
the application does not take it), so a declared length over the limit is
refused before any body byte is read, and a chunked body as soon as it passes
the limit.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from django.conf import settings

from translation import registry

Scope = dict[str, Any]
# How long a refused client may go on sending (discarded) before the connection is cut: closing
# at once with unread data makes the kernel answer with a reset, and the client may then lose
# the 413 it has not read yet.
DRAIN_SECONDS = 2.0


def _protocol_for(path: str) -> str:
    return "anthropic" if path.startswith("/v1/messages") else "openai_chat"


class BodyLimit:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            return await self.app(scope, receive, send)
        limit = settings.GATEWAY_MAX_BODY_BYTES
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
                return await self._refuse(scope, receive, send, limit)
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
                return await self._refuse(scope, receive, send, limit)
            chunks.append(body)
            if not message.get("more_body", False):
                break
        replay = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]
        return await self.app(scope, _replay(replay, receive), send)

    async def _refuse(self, scope: Scope, receive: Any, send: Any, limit: int) -> None:
        body = _refusal_body(scope["path"], limit)
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()),
                                (b"access-control-allow-origin", b"*"),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body, "more_body": True})
        # The answer is out; what the client still sends is dropped before the connection closes.
        try:
            async with asyncio.timeout(DRAIN_SECONDS):
                while (await receive()).get("more_body", False):
                    pass
        except TimeoutError:
            pass
        await send({"type": "http.response.body", "body": b""})


def _replay(messages: list[dict[str, Any]], receive: Any = None) -> Any:
    queue = list(messages)

    async def replay_receive() -> dict[str, Any]:
        if queue:
            return queue.pop(0)
        if receive is not None:
            return await receive()
        return {"type": "http.disconnect"}

    return replay_receive


def error_body(path: str, status: int, message: str, error_type: str) -> bytes:
    """An error for an API path in its protocol's envelope, for answers given before Django runs."""

    return orjson.dumps(registry.get(_protocol_for(path)).render_error(status, message, error_type, None))


def _refusal_body(path: str, limit: int) -> bytes:
    return error_body(path, 413, f"The request body exceeds the limit of {limit} bytes", "request_too_large")

