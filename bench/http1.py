"""A minimal HTTP/1.1 client for the load generator: asyncio protocol, keep-alive, timestamps.

One request at a time per connection. It parses what the servers under test
send (Content-Length, chunked, or a body ended by close) and, for event
streams, notes when each read carrying an SSE ``data:`` line arrived and keeps
the last complete event, where a protocol's terminator must be.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# Chunked-body parser states (``Conn._chunk_left`` when it is not a byte count).
_CHUNK_SIZE, _CHUNK_CRLF, _LAST_CRLF = -1, -2, -3


class HttpError(Exception):
    pass


@dataclass
class Reply:
    status: int = 0
    sent_at: float = 0.0
    head_at: float = 0.0
    first_data_at: float = 0.0  # first body read carrying an SSE data line (or any body for JSON)
    data_times: list[float] = field(default_factory=list)
    body_bytes: int = 0
    last_event: bytes = b""  # the last complete SSE event: where a terminator must be
    pending: bytes = b""  # the event being received
    last_activity: float = 0.0
    stalled: bool = False


class Conn(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._buf = bytearray()
        self._reply: Reply | None = None
        self._done: asyncio.Future[Reply] | None = None
        self._head = True
        self._length = -1  # Content-Length, -1 when chunked or until close
        self._chunked = False
        self._chunk_left = _CHUNK_SIZE  # > 0: bytes of the current chunk still to come
        self._close_after = False
        self._track_events = False
        self.on_first_data: Callable[[], None] | None = None  # streams: called once, at the first data

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        if self._reply is None:
            return
        now = time.perf_counter()
        self._reply.last_activity = now
        self._buf += data
        try:
            self._parse(now)
        except HttpError as exc:
            self._fail(exc)
        except ValueError as exc:  # a number that is not one: the response is malformed
            self._fail(HttpError(f"malformed response: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._reply is not None and not self._head and self._length == -1 and not self._chunked:
            self._complete()  # body delimited by close
        else:
            self._fail(HttpError("connection closed" if exc is None else f"connection lost: {exc}"))

    # -- client side
    async def request(self, raw: bytes, track_events: bool) -> Reply:
        assert self.transport is not None and not self.closed
        loop = asyncio.get_running_loop()
        self._reply = Reply(sent_at=time.perf_counter())
        self._reply.last_activity = self._reply.sent_at
        self._done = loop.create_future()
        self._head, self._length, self._chunked, self._chunk_left = True, -1, False, _CHUNK_SIZE
        self._close_after = False
        self._track_events = track_events
        self.transport.write(raw)
        return await self._done

    @property
    def reply(self) -> Reply | None:
        return self._reply

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    # -- parsing
    def _parse(self, now: float) -> None:
        reply = self._reply
        assert reply is not None
        if self._head:
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
            del self._buf[:end + 4]
            parts = head[0].split(" ", 2)
            if len(parts) < 2 or not parts[1].isdigit():
                raise HttpError(f"bad status line {head[0]!r}")
            reply.status, reply.head_at = int(parts[1]), now
            for line in head[1:]:
                name, _, value = line.partition(":")
                name, value = name.strip().lower(), value.strip()
                if name == "content-length":
                    self._length = int(value)
                elif name == "transfer-encoding" and "chunked" in value.lower():
                    self._chunked = True
                elif name == "connection" and value.lower() == "close":
                    self._close_after = True
            self._head = False
        if self._chunked:
            self._parse_chunks(now)
        elif self._length >= 0:
            if self._buf:
                take = bytes(self._buf[:self._length])
                del self._buf[:len(take)]
                self._length -= len(take)
                self._body(take, now)
            if self._length == 0:
                self._complete()
        elif self._buf:
            take = bytes(self._buf)
            self._buf.clear()
            self._body(take, now)

    def _parse_chunks(self, now: float) -> None:
        buf = self._buf
        while True:
            if self._chunk_left > 0:
                if not buf:
                    return
                take = min(len(buf), self._chunk_left)
                self._body(bytes(buf[:take]), now)
                del buf[:take]
                self._chunk_left -= take
                if self._chunk_left > 0:
                    return
                self._chunk_left = _CHUNK_CRLF
            if self._chunk_left in (_CHUNK_CRLF, _LAST_CRLF):
                if len(buf) < 2:
                    return
                del buf[:2]
                if self._chunk_left == _LAST_CRLF:  # trailers are not used by the servers we measure
                    self._complete()
                    return
                self._chunk_left = _CHUNK_SIZE
            eol = buf.find(b"\r\n")
            if eol < 0:
                return
            size = int(bytes(buf[:eol]).split(b";")[0], 16)
            del buf[:eol + 2]
            self._chunk_left = size if size else _LAST_CRLF

    def _body(self, data: bytes, now: float) -> None:
        reply = self._reply
        assert reply is not None
        reply.body_bytes += len(data)
        if self._track_events:
            before = reply.pending
            pending = before + data
            end = pending.rfind(b"\n\n")
            if end >= 0:
                reply.last_event = pending[:end].rsplit(b"\n\n", 1)[-1]
                pending = pending[end + 2:]
            reply.pending = pending
            if b"data:" in before[-4:] + data:  # "data:" may straddle two reads
                if not reply.first_data_at:
                    reply.first_data_at = now
                    if self.on_first_data is not None:
                        self.on_first_data()
                if not reply.data_times or reply.data_times[-1] != now:  # one mark per socket read
                    reply.data_times.append(now)
        elif not reply.first_data_at:
            reply.first_data_at = now

    def _complete(self) -> None:
        if self._done is not None and not self._done.done():
            assert self._reply is not None
            self._done.set_result(self._reply)
        if self._close_after and self.transport is not None:
            self.transport.close()
            self.closed = True

    def _fail(self, exc: Exception) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_exception(exc)
        if self.transport is not None:
            self.transport.abort()
        self.closed = True


class Pool:
    """Keep-alive connections of one worker, one per address, reopened after a close."""

    def __init__(self, connect_limit: asyncio.Semaphore) -> None:
        self._conns: dict[tuple[str, int], Conn] = {}
        self._limit = connect_limit

    async def get(self, host: str, port: int) -> Conn:
        conn = self._conns.get((host, port))
        if conn is None or conn.closed:
            async with self._limit:  # a burst of connects would overflow the servers' accept queues
                loop = asyncio.get_running_loop()
                _, conn = await loop.create_connection(Conn, host, port)
            self._conns[(host, port)] = conn
        return conn

    def drop(self, host: str, port: int) -> None:
        conn = self._conns.pop((host, port), None)
        if conn is not None:
            conn.abort()

    def close(self) -> None:
        for conn in self._conns.values():
            if conn.transport is not None:
                conn.transport.close()
        self._conns.clear()
