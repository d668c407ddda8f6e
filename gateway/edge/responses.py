"""The API paths' answers: a status, headers and a body — whole bytes or an async stream — that
write themselves to ASGI ``send``. Views build them with the helpers below; the API handler
(``gateway.edge.handler``) adds CORS and writes them.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

import orjson

from ..errors import GatewayError, headers_of, render, status_of

# On every answer the gateway writes itself (``asgiwrite``, ``ApiResponse``, the head limit in
# gateway.serve): a browser must never read a JSON error or an SSE stream as HTML or script.
# Django's pages get it from its SecurityMiddleware (SECURE_CONTENT_TYPE_NOSNIFF).
NOSNIFF = (b"x-content-type-options", b"nosniff")

SSE_HEADERS = {
    "Cache-Control": "no-cache",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}

CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, POST, PUT, DELETE, OPTIONS",
    "Access-Control-Allow-Headers": "Content-Type, Authorization, X-API-Key",
}
_CORS = [(name.lower().encode(), value.encode()) for name, value in CORS_HEADERS.items()]

Send = Any


class ApiResponse:
    """``body`` (bytes) or ``stream`` (an async iterator of bytes, written as it yields)."""

    __slots__ = ("status", "headers", "body", "stream")

    def __init__(self, status: int = 200, body: bytes = b"", content_type: str | None = "application/json",
                 headers: dict[str, str] | None = None, stream: AsyncIterator[bytes] | None = None) -> None:
        self.status = status
        self.headers: dict[str, str] = {"Content-Type": content_type} if content_type else {}
        if headers:
            self.headers.update(headers)
        self.body = body
        self.stream = stream

    def __getitem__(self, name: str) -> str:
        return self._lower()[name.lower()]

    def __setitem__(self, name: str, value: str) -> None:
        self.headers[name] = value

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._lower().get(name.lower(), default)

    def _lower(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    async def send_to(self, send: Send, cors: bool = False) -> None:
        headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in self.headers.items()]
        if "x-content-type-options" not in self._lower():
            headers.append(NOSNIFF)
        if cors:
            headers.extend(_CORS)
        if self.stream is None:
            headers.append((b"content-length", str(len(self.body)).encode()))
            await send({"type": "http.response.start", "status": self.status, "headers": headers})
            await send({"type": "http.response.body", "body": self.body})
            return
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        stream = self.stream
        if isinstance(stream, AsyncGenerator):
            async with aclosing(stream) as parts:
                async for part in parts:
                    if part:
                        await send({"type": "http.response.body", "body": part, "more_body": True})
        else:
            async for part in stream:
                if part:
                    await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body"})


class EventStream(ApiResponse):
    """An SSE answer. Its generator stays at hand: the websocket transport
    (``gateway.endpoints.websocket``) reads the events from it, and throws the client's leaving into it."""

    __slots__ = ("events",)

    def __init__(self, events: AsyncGenerator[bytes, None]) -> None:
        super().__init__(200, content_type="text/event-stream", headers=SSE_HEADERS, stream=events)
        self.events = events


async def events_of(chunks: list[bytes]) -> AsyncGenerator[bytes, None]:
    """An answer made whole in advance, as the generator an :class:`EventStream` takes."""

    for chunk in chunks:
        yield chunk


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> ApiResponse:
    return ApiResponse(status, orjson.dumps(data), headers=headers)


def raw_json_response(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> ApiResponse:
    return ApiResponse(status, body, headers=headers)


def text_response(body: bytes, status: int = 200, content_type: str = "text/plain",
                  headers: dict[str, str] | None = None) -> ApiResponse:
    return ApiResponse(status, body, content_type, headers)


def error_response(protocol: str | None, err: GatewayError) -> ApiResponse:
    """``err`` answered in ``protocol``'s envelope (``gateway.errors.render``), with its headers."""

    body, content_type = render(protocol, err)
    return ApiResponse(status_of(err, protocol), body, content_type, headers_of(err, protocol))
