"""Refuse oversized API bodies before they are read whole, in the caller's error envelope."""

from __future__ import annotations

from typing import Any

import orjson
from django.conf import settings

from translation import registry

Scope = dict[str, Any]


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
                return await self._refuse(scope, send, limit)
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
                return await self._refuse(scope, send, limit)
            chunks.append(body)
            if not message.get("more_body", False):
                break
        replay = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]
        return await self.app(scope, _replay(replay, receive), send)

    async def _refuse(self, scope: Scope, send: Any, limit: int) -> None:
        proto = registry.get(_protocol_for(scope["path"]))
        body = orjson.dumps(proto.render_error(
            413, f"The request body exceeds the limit of {limit} bytes", "request_too_large", None))
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()),
                                (b"access-control-allow-origin", b"*"),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def _replay(messages: list[dict[str, Any]], receive: Any = None) -> Any:
    queue = list(messages)

    async def replay_receive() -> dict[str, Any]:
        if queue:
            return queue.pop(0)
        if receive is not None:
            return await receive()
        return {"type": "http.disconnect"}

    return replay_receive
