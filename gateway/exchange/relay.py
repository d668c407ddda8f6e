"""Upstream SSE body → batches of IR events (and, passed through, the events' bytes), read by a
task so the reader never blocks the writer.

The pump task owns the upstream response: cancelling it (client gone, idle
timeout) closes the upstream connection at once. The consumer waits on a queue
with a timeout, which is what makes keepalives and idle timeouts possible
without cancelling a half-read chunk.

The pump reads only as fast as the client takes the stream: past
``READ_AHEAD`` bytes of upstream answer not yet taken by the client's writer it
waits (and aiohttp, no longer read, stops reading the socket, so the upstream
is held back by TCP). A client reading 35 KB/s had made the gateway pull a
210 MB answer into memory in under a second. The answer is also bounded
(``Bounds``): a line or event's data, the whole body, and the text it carries
(what encoders and taps keep to close a stream: Responses repeats it in four
closing events, so 32 MB of text once cost 700 MB at the end of a stream); past
a bound the stream ends with a transport error in the client's protocol.

What reads the events is the exchange's :class:`Reader`: the protocol's decoder
when the answer is translated, its tap (``translation.passthrough``) when the
upstream's events are forwarded as they are.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Literal, Protocol

from accounts.redact import without_secret
from translation import ir
from translation.passthrough import Tap
from translation.sse import EventTooLarge, SSEEvent, SSEParser
from translation.streams import StreamDecoder

from .idle import IdlePolicy
from .upstream import NETWORK_ERRORS, TooLarge, UpstreamResponse

log = logging.getLogger(__name__)

TIMEOUT: Literal["timeout"] = "timeout"
CONTENT_EVENTS = (ir.BlockStart, ir.BlockDelta, ir.Finish)
READ_AHEAD = 256 * 1024  # bytes of upstream answer read before the client has taken them


@dataclass(frozen=True)
class Bounds:
    event_bytes: int = 8 * 1024 * 1024  # one SSE line, or one event's data
    body_bytes: int = 32 * 1024 * 1024  # the whole answer, decoded
    answer_chars: int = 2 * 1024 * 1024  # text, reasoning and arguments of all its blocks together


@dataclass(slots=True)
class Batch:
    """What one upstream read brought: IR events and, when forwarding, the bytes for the client.

    ``local``: made by the gateway (connection lost, gateway stopping), not read from the upstream.
    """

    events: list[ir.Event]
    wire: bytes = b""
    local: bool = False
    size: int = 0  # upstream bytes it was read from (what the read-ahead counts)


class Reader(Protocol):
    def read(self, events: list[SSEEvent]) -> Batch: ...

    def end(self, events: list[SSEEvent]) -> Batch: ...


def _cleaned(events: list[ir.Event], secret: str) -> None:
    """An error the upstream reported in its stream, without the account's key in its message (an upstream
    may echo the key it was sent; the encoder would write the message out to the client)."""

    for i, event in enumerate(events):
        if type(event) is ir.Error and secret:
            events[i] = dataclasses.replace(event, message=without_secret(event.message, secret))


class Decoding:
    """Translated: the decoder's IR events only. ``secret``: the account's key, kept out of errors."""

    __slots__ = ("_decoder", "_secret")

    def __init__(self, decoder: StreamDecoder, secret: str = "") -> None:
        self._decoder = decoder
        self._secret = secret

    def read(self, events: list[SSEEvent]) -> Batch:
        out: list[ir.Event] = []
        for event in events:
            out.extend(self._decoder.feed(event))
        if any(type(e) is ir.Error for e in out):
            _cleaned(out, self._secret)
        return Batch(out)

    def end(self, events: list[SSEEvent]) -> Batch:
        batch = self.read(events)
        batch.events.extend(self._decoder.finish())
        return batch


class Tapping:
    """Passed through: the tap's IR events and the events' own bytes. ``secret``: the account's key,
    taken out of an error event's bytes (in any JSON spelling) before they are forwarded."""

    __slots__ = ("tap", "_secret")

    def __init__(self, tap: Tap, secret: str = "") -> None:
        self.tap = tap
        self._secret = secret

    def read(self, events: list[SSEEvent]) -> Batch:
        out: list[ir.Event] = []
        wire: list[bytes] = []
        for event in events:
            decoded, data = self.tap.feed(event)
            if self._secret and any(type(e) is ir.Error for e in decoded):
                _cleaned(decoded, self._secret)
                data = without_secret(data.decode("utf-8", "replace"), self._secret).encode()
            out.extend(decoded)
            wire.append(data)
        return Batch(out, b"".join(wire))

    def end(self, events: list[SSEEvent]) -> Batch:
        batch = self.read(events)
        batch.events.extend(self.tap.finish())
        return batch


class OpenStreams:
    """The streams being read, so that a stopping gateway can end each of them cleanly (gateway.edge.drain)."""

    def __init__(self) -> None:
        self._streams: weakref.WeakSet[UpstreamStream] = weakref.WeakSet()
        self._drains: set[asyncio.Task[None]] = set()  # streams read on after their client left

    def add(self, stream: UpstreamStream) -> None:
        self._streams.add(stream)

    def keep(self, task: asyncio.Task[None]) -> None:
        """Hold ``task`` (reading a stream whose client left) until it ends."""

        self._drains.add(task)
        task.add_done_callback(self._drains.discard)

    def abort_all(self, message: str) -> None:
        for stream in list(self._streams):
            stream.abort(message)

    def __len__(self) -> int:
        return len(self._streams)


class UpstreamStream:
    def __init__(self, response: UpstreamResponse, reader: Reader, idle: IdlePolicy,
                 streams: OpenStreams | None = None, bounds: Bounds = Bounds()) -> None:
        self._response = response
        self._reader = reader
        self.idle = idle  # what the upstream's silence costs (gateway.exchange.idle)
        # A deque and one waiter, not an asyncio.Queue read through wait_for: that made a task and
        # a timer per chunk, a measurable share of a stream's cost.
        self._items: deque[Batch | None] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self.last_data = time.monotonic()
        self.ended = False
        self.aborted = False
        self._bounds = bounds
        self._queued = 0  # bytes of the batches in _items
        self._room: asyncio.Future[None] | None = None  # the pump waits on it while the client lags
        self._task = asyncio.create_task(self._pump())
        if streams is not None:
            streams.add(self)

    def _put(self, item: Batch | None) -> None:
        self._items.append(item)
        if item is not None:
            self._queued += item.size
        if self._waiter is not None:
            _wake(self._waiter)

    async def _wait_for_room(self) -> None:
        room = self._room = asyncio.get_running_loop().create_future()
        try:
            await room
        finally:
            self._room = None
        # The upstream's silence counts from when it is read again, not from before the wait.
        self.last_data = time.monotonic()

    async def _pump(self) -> None:
        bounds = self._bounds
        parser = SSEParser(bounds.event_bytes)
        reader = self._reader
        total = chars = 0
        try:
            async for chunk in self._response.aiter_raw():
                self.last_data = time.monotonic()
                total += len(chunk)
                if total > bounds.body_bytes:
                    raise TooLarge(f"the upstream's answer exceeds {bounds.body_bytes} bytes")
                batch = reader.read(parser.feed(chunk))
                chars += sum([len(e.text) for e in batch.events if type(e) is ir.BlockDelta])
                if chars > bounds.answer_chars:
                    raise TooLarge(f"the upstream's answer exceeds {bounds.answer_chars} characters of text")
                if batch.events or batch.wire:
                    batch.size = len(chunk)
                    self._put(batch)
                    if self._queued > READ_AHEAD:
                        await self._wait_for_room()
            self._put(reader.end(parser.finish()))
        except (EventTooLarge, TooLarge) as exc:
            log.warning("upstream answer refused: %s", exc)
            self._put(Batch([ir.transport_error(ir.TransportFailure.TOO_LARGE, f"upstream answer refused: {exc}")],
                            local=True))
        except NETWORK_ERRORS as exc:
            log.info("upstream stream broke: %s", type(exc).__name__)
            self._put(Batch([ir.transport_error(ir.TransportFailure.DISCONNECTED,
                                                f"upstream connection lost ({type(exc).__name__})")],
                            local=True))
        finally:
            self._put(None)
            await self._response.aclose()

    async def next(self, timeout: float) -> Batch | None | Literal["timeout"]:
        """The next batch, None at the end, or TIMEOUT after ``timeout`` seconds of nothing."""

        if self.ended:
            return None
        if not self._items:
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            timer = loop.call_later(max(timeout, 0.0), _wake, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
            if not self._items:
                return TIMEOUT
        item = self._items.popleft()
        if item is None:
            self.ended = True
        else:
            self._queued -= item.size
            if self._room is not None and self._queued <= READ_AHEAD // 2:
                _wake(self._room)
        return item

    def idle_for(self) -> float:
        return time.monotonic() - self.last_data

    def close(self) -> None:
        """Stop reading and drop the upstream connection (idempotent, safe from a finally)."""

        if not self._task.done():
            self._task.cancel()

    def abort(self, message: str) -> None:
        """End the stream now with an error its reader turns into the protocol's error ending
        (the gateway is stopping); the upstream connection is dropped."""

        if not self._task.done():
            self.aborted = True
            self._put(Batch([ir.Error(message, error_type="overloaded_error", status=503)], local=True))
            self._task.cancel()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def read_until_content(stream: UpstreamStream) -> tuple[list[Batch], str]:
    """Collect batches until content shows, an error, the end, or a keepalive is due (the client has
    waited long enough for its first bytes).

    Returns the batches and why it stopped: "content", "error", "end" or "wait".
    Until content has been seen nothing has gone to the client, so an error here
    can still be retried on another account.
    """

    idle = stream.idle
    collected: list[Batch] = []
    deadline = time.monotonic() + idle.keepalive
    while True:
        item = await stream.next(min(deadline - time.monotonic(), idle.until_stalled(stream.idle_for())))
        if item is None:
            return collected, "end"
        if item == TIMEOUT:
            if idle.stalled(stream.idle_for()):
                collected.append(Batch([idle.stall()], local=True))
                return collected, "error"
            return collected, "wait"
        collected.append(item)
        if any(isinstance(e, ir.Error) for e in item.events):
            return collected, "error"
        if any(isinstance(e, CONTENT_EVENTS) for e in item.events):
            return collected, "content"
