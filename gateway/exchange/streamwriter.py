"""The stream for the client: opened once the upstream's stream shows content (an error before that is
judged like an error status, and another account may be tried), then written batch by batch with
keepalives, the idle timeout and a clean end in the client's protocol.

What the events say of how the stream ended (finished, cut, the error, the usage it is charged) is
:class:`gateway.exchange.outcome.StreamOutcome`'s; this module does the I/O around it: the upstream
read, the client's bytes, the answer kept for ``previous_response_id``, the read-on after the client
left, and the request's end (``gateway.exchange.finish``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

from accounts.outcomes import Verdict
from translation import ir, sse
from translation.passthrough import model_rewrite
from translation.protocol import EncodeContext, ProtocolModule

from ..edge.responses import EventStream
from ..log.record import Attempt
from ..log.streamlog import SpelledText, kept_stream
from ..log.writer import LogWriter
from . import conversation
from .clientstream import ClientStream, Encoding, Forwarding
from .exchange import Exchange
from .finish import finish
from .idle import IdlePolicy
from .judge import Retry, judge
from .neterrors import NetworkFailure
from .outcome import StreamOutcome
from .relay import (
    TIMEOUT,
    Batch,
    Bounds,
    Decoding,
    OpenStreams,
    Reader,
    Tapping,
    UpstreamStream,
    read_until_content,
)
from .upstream import UpstreamResponse

if TYPE_CHECKING:
    from ..app import Gateway

log = logging.getLogger(__name__)

# What a stream whose client has left is read on for, at most, besides the time: a model writes far less
# in the few seconds a drain lasts; an upstream that streams faster is not read on at will.
DRAIN_BYTES = 1024 * 1024


async def open_stream(gw: Gateway, ex: Exchange, proto: ProtocolModule, response: UpstreamResponse,
                      attempt: Attempt, secret: str) -> EventStream:
    provider = ex.route.provider
    reader: Reader
    client: ClientStream
    if ex.passthrough:
        tap = proto.stream_tap(model_rewrite(ex.route.upstream_model, ex.request.model), ex.request.model)
        reader, client = Tapping(tap, secret), Forwarding(tap)
    else:
        reader = Decoding(proto.stream_decoder(), secret)
        client = Encoding(ex.client.stream_encoder(EncodeContext(model=ex.request.model, request=ex.request,
                                                                 body=ex.body)))
    idle = IdlePolicy(provider.idle_timeout, gw.options.keepalive_seconds, ex.client.KEEPALIVE)
    bounds = Bounds(gw.options.max_upstream_event_bytes, gw.options.max_upstream_bytes, gw.options.max_answer_chars)
    stream = UpstreamStream(response, reader, idle, gw.streams, bounds)
    try:
        first, why = await read_until_content(stream)
    except BaseException:
        stream.close()
        raise
    events = [e for batch in first for e in batch.events]
    if why == "error" and not any(isinstance(e, (ir.BlockStart, ir.BlockDelta)) for e in events):
        stream.close()
        err = next(e for e in events if isinstance(e, ir.Error))
        if err.transport:
            attempt.verdict, attempt.error = Verdict.NETWORK, err.message
            raise Retry(NetworkFailure.TIMEOUT if err.error_type == ir.TransportFailure.TIMEOUT
                        else NetworkFailure.LOST)
        await judge(gw, ex, attempt, err, "", secret)
    if ex.keep and isinstance(client, Forwarding):
        upstream_id = next((e.id for e in events if isinstance(e, ir.MessageStart) and e.id), None)
        shown = await conversation.shown_id(ex, upstream_id, gw.conversations)
        if shown is not None and upstream_id is not None:
            client.show_id(upstream_id, shown)
    ex.record.ttfb_ms = ex.elapsed_ms()
    writer = StreamWriter(ex, stream, client, gw.log, gw.conversations, gw.options.abandoned_stream_seconds,
                          gw.streams)
    body = writer.body(first)
    # A body the server never starts iterating (the client left in between) runs no
    # finally: when it is collected, the upstream is still closed and the row still written.
    weakref.finalize(body, writer.abandon)
    return EventStream(body)


class StreamWriter:
    """Writes the stream for the client, with keepalives, idle timeout and a clean end.

    When the client leaves before the upstream said what it used, the upstream is read on, for at
    most ``drain`` seconds (and ``DRAIN_BYTES``) without writing anything, for the usage every
    protocol reports at its end (the gateway asks a Chat stream for it); what never comes is
    estimated (``StreamOutcome.usage``), and the row says so (``usage_estimated``).
    """

    def __init__(self, ex: Exchange, stream: UpstreamStream, client: ClientStream,
                 log_writer: LogWriter, stored: conversation.Conversations, drain: float = 0.0,
                 streams: OpenStreams | None = None) -> None:
        self.ex = ex
        self.drain = drain
        self.streams = streams
        self.outcome = StreamOutcome()
        self.gone = False  # the client left before the end
        self.draining = False  # read on after the client left (_drain)
        self.stored = stored
        self.stream = stream
        self.client = client
        self.log_writer = log_writer
        self.kept = not ex.keep  # nothing to keep, or kept already
        self.logged = False
        # The streamed body as sent, kept only with body logging on (and only up to twice the cap).
        limit = log_writer.body_limit
        self.sent: bytearray | None = bytearray() if limit is not None else None
        self.sent_cap = 2 * (limit or 0)
        self.spelled = SpelledText(self.sent_cap) if limit is not None else None  # see gateway.log.streamlog

    def _note(self, events: list[ir.Event]) -> None:
        self.outcome.feed(events, self.stream.aborted)
        if self.spelled is not None:
            for event in events:
                if isinstance(event, ir.BlockDelta):
                    self.spelled.feed(event)

    def _sent(self, out: bytes) -> bytes:
        if self.sent is not None and len(self.sent) < self.sent_cap:
            self.sent += out
        return out

    def _feed(self, batch: Batch) -> bytes:
        self._note(batch.events)
        return self._sent(self.client.feed(batch))

    def _fail(self, error: ir.Error) -> bytes:
        self._note([error])
        return self._sent(self.client.fail(error))

    async def body(self, first: list[Batch]) -> AsyncGenerator[bytes, None]:
        stream = self.stream
        try:
            # What one upstream read brought goes out as one write: each write costs the server a
            # message and a syscall, and these events arrived together anyway.
            # Bytes on the wire now, even before the first token.
            opening = b"".join([self._feed(batch) for batch in first])
            if not self.kept:
                self._keep()
            # Silence is filled as gateway.exchange.idle says, once the stream has begun with the protocol's own event.
            idle, begun = stream.idle, bool(opening)
            yield opening or sse.comment()
            while True:
                item = await stream.next(idle.wait(stream.idle_for()))
                if item is None:
                    break
                if item == TIMEOUT:
                    if idle.stalled(stream.idle_for()):
                        stream.close()
                        yield self._fail(idle.stall())
                        break
                    yield idle.filler(begun)
                    continue
                out = self._feed(item)
                if not self.kept:
                    self._keep()
                if out:
                    begun = True
                    yield out
            out = self._sent(self.client.finish())
            if not self.kept:
                self._keep()
            if out:
                yield out
        except (asyncio.CancelledError, GeneratorExit):
            self.outcome.client_left()
            self.gone = True
            raise
        except Exception:
            # The status line is out, so an escaping exception would leave the client waiting
            # forever (the server cannot answer 500 any more): end the stream, in protocol if we can.
            log.exception("stream to the client failed")
            self.outcome.gateway_failed()
            try:
                yield self.client.fail(ir.Error("The gateway failed while streaming; it has been logged"))
            except Exception:  # noqa: BLE001 - the encoder itself is what failed: just end the body
                pass
        finally:
            if not (self.gone and self.drain > 0 and not self.outcome.reported and not stream.ended
                    and self._drain_later()):
                stream.close()
                self._log()

    def _drain_later(self) -> bool:
        """Read on in a task of its own; False when there is no loop to run it (then end now)."""

        try:
            task = asyncio.get_running_loop().create_task(self._drain())
        except RuntimeError:
            return False
        self.draining = True  # the body is collected now: its finalizer must leave the stream to the drain
        if self.streams is not None:
            self.streams.keep(task)
        return True

    async def _drain(self) -> None:
        """The client has left: read on (nothing is written) until the upstream reports its usage, the
        stream ends, or ``drain`` seconds pass; then close the upstream and write the row."""

        stream = self.stream
        deadline = time.monotonic() + self.drain
        left = DRAIN_BYTES
        try:
            while not self.outcome.reported and left > 0:
                wait = min(deadline - time.monotonic(), stream.idle.until_stalled(stream.idle_for()))
                if wait <= 0:
                    break
                item = await stream.next(wait)
                if item is None:
                    break
                if item != TIMEOUT:
                    left -= item.size
                    self._note(item.events)
        finally:
            stream.close()
            self._log()

    def _keep(self) -> None:
        """Keep the answer once its whole object is known, before the event that ends it goes out: a
        follow-up the client sends on that event then finds it (in this process's cache at once; on
        another process once committed, which its read waits for)."""

        if self.client.final is not None:
            self.kept = True
            conversation.keep(self.ex, self.client.final, self.outcome.upstream_id, self.stored)

    def abandon(self) -> None:
        if not self.logged and not self.draining:
            self.stream.close()
            self.outcome.client_left()
            self._log()

    def _log(self) -> None:
        if self.logged:
            return
        self.logged = True
        outcome = self.outcome
        usage = outcome.usage(self.ex.input_estimate)
        self.ex.record.usage_estimated = outcome.cut
        if self.sent is not None and self.spelled is not None:
            self.ex.record.response_body = kept_stream(self.log_writer, self.sent.decode("utf-8", "replace"),
                                                       self.spelled)
        # The stream outlives api_call: its end, not api_call, ends the request.
        finish(self.log_writer, self.ex, 200, outcome.error_class, usage, outcome.finish)
