"""Every request body is read here, within a size and a time, before any application sees it.

For every path (API, admin, dashboard, static): a declared length over the
path's limit is refused before any body byte is read, a body without one as
soon as it passes the limit (413); a body that comes too slowly is refused
(408) and its connection closed. Then the whole body is handed to the
application in one message. The limit is ``GATEWAY_MAX_BODY_BYTES`` for the API
and ``GATEWAY_MAX_PAGE_BODY_BYTES`` for pages: a 200 MB form POST to the login
page had been read into memory whole, and a connection that sent its body a
byte at a time was never closed.

The time: ``GATEWAY_BODY_TIMEOUT`` seconds, plus one second for every
``MIN_RATE`` bytes received, measured from the end of the head. A client on a
slow link keeps its time as long as bytes come; one trickling a byte now and
then does not.

On the paths of Anthropic's protocol (its module's ``LENGTH_REQUIRED``) a chunked body without a
``Content-Length`` is refused (411): Claude Code and the Anthropic SDKs always send the length (the
Claude Code gateway protocol allows the refusal), and a declared length lets a body over the limit
be refused before it is read.

An API body sent with ``Content-Encoding`` (gzip, deflate or zstd: Codex
compresses its requests with zstd) is decoded here, within the same limit (a
100 KB gzip body may inflate to 100 MB), and the header dropped.

uvicorn hands the body over as it arrives (and stops reading the socket while
the application does not take it). Daphne (Twisted) receives the whole body
before it calls the application, so there the 413 comes only once the body is
in.
"""

from __future__ import annotations

import asyncio
import time
import zlib
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
DRAIN_BYTES = 4 * 1024 * 1024  # ...and not more: a refused 200 MB body is not read after all
STEP = 1024 * 1024  # decoded a megabyte at a time, so that a bomb is caught before it is whole
MIN_RATE = 64 * 1024  # bytes a second that earn a slow body more time


class Refused(Exception):
    """A body refused before any application saw it: the status, the message and the error type."""

    def __init__(self, status: int, message: str, error_type: str) -> None:
        super().__init__(message)
        self.status, self.message, self.error_type = status, message, error_type


class BodyLimit:
    """The limit as an ASGI wrapper, for Django's pages; the API handler calls :func:`read_body` itself."""

    def __init__(self, app: App, routes: RouteTable, limit: int, timeout: float) -> None:
        self.app = app
        self.routes = routes
        self.limit = limit
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        try:
            body = await read_body(scope, receive, self.limit, self.timeout)
        except Refused as refusal:
            return await refuse(send, receive, self.routes, scope["path"], refusal)
        if body is None:
            return  # the client left
        await self.app(scope, _replay(body, receive), send)


async def read_body(scope: Scope, receive: Receive, limit: int, timeout: float,
                    decode: bool = False, length_required: bool = False) -> bytes | None:
    """The whole body within ``limit`` bytes and the time; None when the client left first.

    ``decode``: a body with a ``Content-Encoding`` is decoded within the same limit (the API's).
    ``length_required``: a chunked body without a ``Content-Length`` is refused (411)."""

    declared = _header(scope, b"content-length")
    if declared is None and length_required and _header(scope, b"transfer-encoding"):
        raise Refused(411, "Send the request body with a Content-Length header: a chunked body without one is "
                           "not accepted here", "invalid_request_error")
    if declared is not None:
        try:
            if int(declared) > limit:
                raise _too_large(limit)
        except ValueError:
            pass
    chunks: list[bytes] = []
    size = 0
    started = time.monotonic()
    while True:
        left = started + timeout + size / MIN_RATE - time.monotonic()
        try:
            async with asyncio.timeout(max(left, 0.0)):
                message = await receive()
        except TimeoutError:
            raise Refused(408, "The request body did not arrive in time", "request_timeout") from None
        if message["type"] != "http.request":
            return None
        part = message.get("body", b"")
        size += len(part)
        if size > limit:
            raise _too_large(limit)
        chunks.append(part)
        if not message.get("more_body", False):
            body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            if decode:
                encoding = _header(scope, b"content-encoding")
                if encoding:
                    body = _decoded(body, encoding, limit)
            return body


async def refuse(send: Any, receive: Receive, routes: RouteTable, path: str, refusal: Refused) -> None:
    """The refusal in the path's envelope; after a 413, what the client still sends is read and dropped."""

    await send_error(send, routes, path, refusal.status, refusal.message, refusal.error_type,
                     [(b"access-control-allow-origin", b"*"), (b"connection", b"close")], more_body=True)
    if refusal.status in (411, 413):
        # The answer is out; what the client still sends is dropped before the connection closes.
        drained = 0
        try:
            async with asyncio.timeout(DRAIN_SECONDS):
                while drained < DRAIN_BYTES:
                    message = await receive()
                    drained += len(message.get("body", b""))
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            pass
    await send({"type": "http.response.body", "body": b""})


def _too_large(limit: int) -> Refused:
    return Refused(413, f"The request body exceeds the limit of {limit} bytes", "request_too_large")


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1").strip().lower()
    return None


def _decoded(body: bytes, encoding: str, limit: int) -> bytes:
    """``body`` decoded from its content codings (applied in the order listed), within ``limit`` bytes."""

    for coding in reversed([c.strip() for c in encoding.split(",") if c.strip()]):
        if coding == "identity":
            continue
        try:
            if coding in ("gzip", "x-gzip", "deflate"):
                # gzip's header, or zlib's (deflate as HTTP means it), or raw deflate as some clients send.
                wbits = 16 + zlib.MAX_WBITS if coding != "deflate" else (
                    zlib.MAX_WBITS if body[:1] and body[0] & 0x0F == 8 else -zlib.MAX_WBITS)
                inflater = zlib.decompressobj(wbits)
                pieces: list[bytes] = []
                size = 0
                rest = body
                while not inflater.eof:
                    piece = inflater.decompress(rest, STEP)
                    rest = inflater.unconsumed_tail
                    if not piece and not rest:
                        break  # the input ended before the stream did
                    size += len(piece)
                    if size > limit:
                        raise _too_large(limit)
                    pieces.append(piece)
                if not inflater.eof:
                    raise ValueError("truncated")
                out = b"".join(pieces)
            elif coding == "zstd":
                import zstandard

                pieces = []
                size = 0
                with zstandard.ZstdDecompressor().stream_reader(body, read_across_frames=True) as reader:
                    while piece := reader.read(STEP):
                        size += len(piece)
                        if size > limit:
                            raise _too_large(limit)
                        pieces.append(piece)
                out = b"".join(pieces)
            else:
                raise Refused(415, f"Content-Encoding {coding!r} is not supported; send gzip, deflate, zstd "
                                    "or an uncompressed body", "invalid_request_error")
        except (zlib.error, ValueError) as exc:
            raise Refused(400, f"The request body is not valid {coding}", "invalid_request_error") from exc
        except Exception as exc:  # noqa: BLE001 - zstandard.ZstdError and kin: a broken body
            if isinstance(exc, Refused):
                raise
            raise Refused(400, f"The request body is not valid {coding}", "invalid_request_error") from exc
        body = out
    return body


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body in one message, then whatever the server says next (a disconnect)."""

    sent = False

    async def replay_receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay_receive
