"""HTTP response helpers shared by the API views."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import orjson
from django.http import HttpResponse, StreamingHttpResponse

from ..errors import GatewayError, headers_of, render, status_of

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


class EventStream(StreamingHttpResponse):
    """An SSE answer that keeps its own generator at hand: the websocket transport
    (``gateway.endpoints.websocket``) reads the events from it, and throws the client's leaving into it,
    without going through the wrapper Django's iteration puts around it."""

    def __init__(self, events: AsyncGenerator[bytes, None]) -> None:
        super().__init__(events, content_type="text/event-stream", headers=SSE_HEADERS)
        self.events = events


async def events_of(chunks: list[bytes]) -> AsyncGenerator[bytes, None]:
    """An answer made whole in advance, as the generator an :class:`EventStream` takes."""

    for chunk in chunks:
        yield chunk


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> HttpResponse:
    return raw_json_response(orjson.dumps(data), status, headers)


def raw_json_response(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> HttpResponse:
    resp = HttpResponse(body, status=status, content_type="application/json")
    for name, value in (headers or {}).items():
        resp[name] = value
    return resp


def error_response(protocol: str | None, err: GatewayError) -> HttpResponse:
    """``err`` answered in ``protocol``'s envelope (``gateway.errors.render``), with its headers."""

    body, content_type = render(protocol, err)
    resp = HttpResponse(body, status=status_of(err, protocol), content_type=content_type)
    for name, value in headers_of(err, protocol).items():
        resp[name] = value
    return resp
