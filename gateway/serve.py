"""Serve the gateway: ``python -m gateway.serve --host 0.0.0.0 --port 8000``.

uvicorn with uvloop and httptools. Measured against Daphne in one bench run
(chat→chat, same machine and upstream): the bare relay alone added 1.56 ms at
concurrency 1 on Daphne, more than the 1.5 ms the whole gateway may add, and
0.80 ms on uvicorn; the gateway served 1,195 requests/s at concurrency 16 on
Daphne and 2,529 on uvicorn. Daphne's HTTP parsing and writes go through
Twisted in pure Python; httptools parses in C and uvloop runs the loop in C.
Channels' websocket consumers run unchanged (uvicorn speaks ASGI websockets).

SIGTERM or SIGINT drains first, as on Daphne (:mod:`gateway.edge.daphne`; see :mod:`gateway.edge.drain`):
new API requests get 503 and ``/readyz`` turns unavailable, open requests get
``GATEWAY_SHUTDOWN_GRACE`` seconds, streams still open then end in their
client's protocol, the request log is flushed; only then does uvicorn stop.
A second signal stops at once.

The request head is bounded, as Twisted bounds it on Daphne: httptools
and uvicorn keep whatever headers a client sends (160 MB of them grew the
process by as much, without an answer) and wait for them forever.
:class:`BoundedHeadProtocol` answers 431 past ``GATEWAY_MAX_HEAD_BYTES`` and
408 when the head is not in within ``GATEWAY_HEAD_TIMEOUT`` seconds of the
connection (or of the request's first byte), in the caller's error envelope on
API paths, and closes the connection.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
from dataclasses import dataclass
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")


@dataclass(frozen=True)
class HeadLimits:
    max_bytes: int
    timeout: float
    routes: Any  # gateway.edge.routes.RouteTable: the envelope of a refusal (None: plain text)


class BoundedHeadProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a request head bounded in size and in time."""

    _head_timer: asyncio.TimerHandle | None = None
    _in_head = False
    _head_bytes = 0  # bytes of reads that left the head unfinished
    _head_parsed = 0  # bytes of request line and header fields the parser has handed over
    _head_overflow = False

    def __init__(self, *args: Any, head: HeadLimits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head = head

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # Counted after parsing: a read that completes the head (and may carry a body) is not head.
        # A head that arrives whole in one read is counted field by field as it is parsed (on_url,
        # on_header): what the parser holds is refused before a request is made of it.
        if self._in_head and not self.transport.is_closing():
            self._head_bytes += len(data)
            if self._head_bytes > self.head.max_bytes:
                self._too_large()

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value) + 4)
        super().on_header(name, value)

    def _count_head(self, size: int) -> None:
        self._head_parsed += size
        if self._head_parsed > self.head.max_bytes:
            self._head_overflow = True
            raise _HeadTooLarge  # stops the parser; uvicorn then answers 400, which send_400_response turns

    def send_400_response(self, msg: str) -> None:
        if self._head_overflow:
            self._too_large()
        else:
            super().send_400_response(msg)

    def _too_large(self) -> None:
        self._refuse(431, "Request Header Fields Too Large",
                     f"The request line and headers exceed the limit of {self.head.max_bytes} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_bytes = self._head_parsed = 0
        if self._head_timer is None:  # a later request on a kept-alive connection
            self._arm_head_timer()

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._cancel_head_timer()
        super().on_headers_complete()

    def _arm_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.head.timeout, self._head_too_slow)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self._refuse(408, "Request Timeout", "The request headers did not arrive in time")

    def _refuse(self, status: int, reason: str, message: str) -> None:
        from .errors import error_body

        self._cancel_head_timer()
        self._in_head = False
        path = (getattr(self, "url", b"") or b"").split(b"?", 1)[0].decode("latin-1")
        envelope = self.head.routes.envelope(path) if self.head.routes is not None else None
        body, kind = error_body(envelope, status, message, "invalid_request_error")
        self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n"
                             b"x-content-type-options: nosniff\r\n"  # as on every answer (gateway.edge.asgiwrite)
                             b"connection: close\r\n\r\n" % (status, reason.encode(), kind.encode(), len(body))
                             + body)
        self.transport.close()


class GatewayServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, drain: Any) -> None:
        super().__init__(config)
        self.drain = drain
        self.draining: asyncio.Task[None] | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # Runs in the loop's thread (uvicorn installs it with signal.signal), between two steps of the loop.
        if self.draining is not None or self.should_exit:
            self.should_exit = self.force_exit = True  # asked twice: stop now
            return
        self.draining = asyncio.get_running_loop().create_task(self._drain_then_exit())

    async def _drain_then_exit(self) -> None:
        try:
            await self.drain.stop(self.drain.gw.options.shutdown_grace)
        finally:
            self.should_exit = True


class _HeadTooLarge(Exception):
    pass


def config(app: Any, host: str, port: int, **overrides: Any) -> uvicorn.Config:
    """uvicorn's settings for ``app`` (the edge, whose options bound the head; else the settings')."""

    gw = getattr(app, "gw", None)
    if gw is not None:
        head = HeadLimits(gw.options.max_head_bytes, gw.options.head_timeout, gw.routes)
    else:  # the bench's bare relay on our server settings: the defaults, plain-text refusals
        from .options import Options

        head = HeadLimits(Options.max_head_bytes, Options.head_timeout, None)
    options: dict[str, Any] = {
        "host": host, "port": port,
        "loop": "auto", "ws": "auto",  # uvloop where installed (not on Windows); websockets
        "http": functools.partial(BoundedHeadProtocol, head=head),
        "lifespan": "off",  # nothing to start: connections and pools open on first use
        "access_log": False,  # the gateway keeps its own request log
        "server_header": False,
        "backlog": 1024,
        # Longer than the 5 s default: SDK clients keep their connections between calls, and one
        # dropped under a request just being sent costs the client a failed request or a retry.
        "timeout_keep_alive": 75,
        "log_level": "info",
    }
    options.update(overrides)
    return uvicorn.Config(app, **options)


def main(argv: list[str] | None = None, prog: str = "python -m gateway.serve") -> None:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    args = parser.parse_args(argv)
    from .asgi import application

    GatewayServer(config(application, args.host, args.port, log_level=args.log_level), application.drain).run()


if __name__ == "__main__":
    main()
