"""Refuse oversized API bodies before they are read whole, in the caller's error envelope.

Two layers: :class:`BodyLimit` is the ASGI guard (any server), and
:func:`guard_daphne` moves the same check into Daphne's HTTP parser, because
Twisted reads a whole request body into a temporary file before the ASGI
application sees its first byte: without it a 100 MB upload is received in
full, and a declared length nobody sends keeps the connection waiting forever.
"""

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
        body = _refusal_body(scope["path"], limit)
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


def error_body(path: str, status: int, message: str, error_type: str) -> bytes:
    """An error for an API path in its protocol's envelope, for answers given before Django runs."""

    return orjson.dumps(registry.get(_protocol_for(path)).render_error(status, message, error_type, None))


def _refusal_body(path: str, limit: int) -> bytes:
    return error_body(path, 413, f"The request body exceeds the limit of {limit} bytes", "request_too_large")


# How long a refused client may go on sending (discarded) before the connection is cut: closing
# at once with unread data makes the kernel answer with a reset, and the client may then lose
# the 413 it has not read yet.
DRAIN_SECONDS = 2.0


def guard_daphne() -> None:
    """Refuse oversized ``/v1/`` bodies inside Daphne as the headers and chunks arrive.

    Twisted offers no hook for this, so Daphne's request class is patched (idempotently):
    a declared ``Content-Length`` over the limit is answered with 413 before any body byte
    is read; a chunked body is counted as it arrives and answered once it passes the
    limit. The refused connection then discards input for :data:`DRAIN_SECONDS` and closes.
    """

    try:
        from daphne.http_protocol import WebRequest
    except ImportError:  # another ASGI server: BodyLimit alone does the job
        return
    if getattr(WebRequest, "_gateway_body_guard", False):
        return
    got_length, handle_chunk = WebRequest.gotLength, WebRequest.handleContentChunk

    def guarded_got_length(self: Any, length: int | None) -> None:
        got_length(self, length)
        self._gateway_path = _api_path(self.channel)
        self._gateway_received = 0
        if self._gateway_path and length is not None and length > settings.GATEWAY_MAX_BODY_BYTES:
            _refuse_in_daphne(self, self._gateway_path)

    def guarded_chunk(self: Any, data: bytes) -> None:
        path = getattr(self, "_gateway_path", None)
        if path:
            if getattr(self, "_gateway_refused", False):
                return
            self._gateway_received += len(data)
            if self._gateway_received > settings.GATEWAY_MAX_BODY_BYTES:
                _refuse_in_daphne(self, path)
                return
        handle_chunk(self, data)

    WebRequest.gotLength = guarded_got_length
    WebRequest.handleContentChunk = guarded_chunk
    WebRequest._gateway_body_guard = True


def _api_path(channel: Any) -> str | None:
    # Twisted knows the request line here but sets request.path only once the body is in.
    raw = getattr(channel, "_path", None)
    if not isinstance(raw, bytes):
        return None
    path = raw.split(b"?", 1)[0].decode("ascii", "replace")
    return path if path.startswith("/v1/") else None


def _refuse_in_daphne(request: Any, path: str) -> None:
    from twisted.internet import reactor

    request._gateway_refused = True
    request.requestHeaders.removeHeader(b"Expect")  # no "100 Continue" after the refusal
    body = _refusal_body(path, settings.GATEWAY_MAX_BODY_BYTES)
    head = (b"HTTP/1.1 413 Payload Too Large\r\ncontent-type: application/json\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\naccess-control-allow-origin: *\r\n"
            b"connection: close\r\n\r\n")
    channel = request.channel
    channel.dataReceived = lambda data: None  # the rest of the body is discarded, never parsed
    transport = channel.transport
    transport.write(head + body)
    try:
        transport.loseWriteConnection()
    except (AttributeError, NotImplementedError):
        transport.loseConnection()
    reactor.callLater(DRAIN_SECONDS, transport.abortConnection)
