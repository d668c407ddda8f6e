"""Upstream SSE body → IR events, read by a task so the reader never blocks the writer.

The pump task owns the upstream response: cancelling it (client gone, idle
timeout) closes the upstream connection at once. The consumer waits on a queue
with a timeout, which is what makes keepalives and idle timeouts possible
without cancelling a half-read chunk.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import deque
from typing import Literal

from translation import ir
from translation.protocol import StreamDecoder
from translation.sse import SSEParser

from .upstream import NETWORK_ERRORS, UpstreamResponse

log = logging.getLogger(__name__)

TIMEOUT: Literal["timeout"] = "timeout"
CONTENT_EVENTS = (ir.BlockStart, ir.BlockDelta, ir.Finish)


class UpstreamStream:
    def __init__(self, response: UpstreamResponse, decoder: StreamDecoder, idle_timeout: float) -> None:
        self._response = response
        self._decoder = decoder
        self.idle_timeout = idle_timeout
        # A deque and one waiter, not an asyncio.Queue read through wait_for: that made a task and
        # a timer per chunk, a measurable share of a stream's cost.
        self._items: deque[list[ir.Event] | None] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self.last_data = time.monotonic()
        self.ended = False
        self._task = asyncio.create_task(self._pump())
        OPEN.add(self)

    def _put(self, item: list[ir.Event] | None) -> None:
        self._items.append(item)
        if self._waiter is not None:
            _wake(self._waiter)

    async def _pump(self) -> None:
        parser = SSEParser()
        decoder = self._decoder
        try:
            async for chunk in self._response.aiter_raw():
                self.last_data = time.monotonic()
                events: list[ir.Event] = []
                for sse_event in parser.feed(chunk):
                    events.extend(decoder.feed(sse_event))
                if events:
                    self._put(events)
            events = []
            for sse_event in parser.finish():
                events.extend(decoder.feed(sse_event))
            events.extend(decoder.finish())
            self._put(events)
        except NETWORK_ERRORS as exc:
            log.info("upstream stream broke: %s", type(exc).__name__)
            self._put([ir.Error(f"upstream connection lost ({type(exc).__name__})",
                                error_type="upstream_disconnected", status=502)])
        finally:
            self._put(None)
            await self._response.aclose()

    async def next(self, timeout: float) -> list[ir.Event] | None | Literal["timeout"]:
        """The next batch of events, None at the end, or TIMEOUT after ``timeout`` seconds of nothing."""

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
            self._put([ir.Error(message, error_type="overloaded_error", status=503)])
            self._task.cancel()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


# Streams being read, so that a stopping gateway can end each of them cleanly (gateway.shutdown).
OPEN: weakref.WeakSet[UpstreamStream] = weakref.WeakSet()


async def read_until_content(stream: UpstreamStream, wait: float) -> tuple[list[ir.Event], str]:
    """Collect events until content shows, an error, the end, or ``wait`` seconds pass.

    Returns the events and why it stopped: "content", "error", "end" or "wait".
    Until content has been seen nothing has gone to the client, so an error here
    can still be retried on another account.
    """

    collected: list[ir.Event] = []
    deadline = time.monotonic() + wait
    while True:
        remaining = min(deadline - time.monotonic(), stream.idle_timeout - stream.idle_for())
        item = await stream.next(remaining)
        if item is None:
            return collected, "end"
        if item == TIMEOUT:
            if stream.idle_for() >= stream.idle_timeout:
                collected.append(ir.Error("upstream sent nothing within its idle timeout",
                                          error_type="upstream_timeout", status=504))
                return collected, "error"
            return collected, "wait"
        collected.extend(item)
        if any(isinstance(e, ir.Error) for e in item):
            return collected, "error"
        if any(isinstance(e, CONTENT_EVENTS) for e in item):
            return collected, "content"
