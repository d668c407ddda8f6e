"""Same protocol on both sides: the upstream's events reach the client as they came, a tap reads them.

The tap is the protocol's own stream decoder (usage, finish and errors for the
request log, billing and the retry decision) plus the little wire state that
protocol needs to end a stream the upstream broke: what is open, and whether its
terminator was seen. Events are forwarded whole, in order, with their names and
data unchanged (re-framed with LF line ends; upstream comments are not
forwarded, the gateway sends its own keepalives). An event the decoder cannot
read is not forwarded: the stream ends there, in the protocol, exactly as a
translated stream would.

The one rewrite, the same in JSON bodies and streams: where the protocol reports
the response's model (Chat: every chunk's ``model``; Messages: ``message_start``'s
``message.model``; Responses: the ``response`` object of its lifecycle events),
the model name the gateway sent is replaced by the name the client asked for
(only when the two differ: an alias or a ``provider/model`` name routed it). A
name the upstream reports that the gateway did not send (a dated snapshot of
it, say) is left as reported. Ids and everything else are the upstream's. (One repair beside it, for upstreams that break the protocol: Chat
stream chunks labelled ``chat.completion`` are relabelled ``chat.completion.chunk``,
see ``openai_chat/tap.py``.)

The tap is light on the events that are most of a stream: a content delta for the block the
decoder has open (Messages' text and thinking deltas, Chat's plain text chunks, Responses' text,
refusal, reasoning and arguments deltas) is checked as JSON and read into the one ``BlockDelta``
the decoder would have made of it, without the decoder's reading of the event (``Tap._light``;
Responses hands the parsed delta to its decoder, which alone knows which block an output and
content index name and keeps the text a ``.done`` event is checked against); anything else, or
anything unusual about such an event, goes to the decoder as before. What the client gets is the
same either way; only the IR events' bookkeeping that no passed-through stream reads (citation
offsets, in Messages and Chat) is not advanced by the light events.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import Any

from . import ir, sse
from .encoder_base import NO_FINISH
from .sse import SSEEvent
from .streams import StreamDecoder

_TYPE = re.compile(r'"type"\s*:\s*"([a-z_.]+)"')


def event_type(event: SSEEvent) -> str | None:
    """The event's name, or, from an upstream that leaves ``event:`` lines out, the ``type`` its
    data leads with (both protocols that name events put ``type`` first)."""

    if event.event is not None:
        return event.event
    match = _TYPE.search(event.data)
    return match.group(1) if match else None


def json_object(data: str) -> dict[str, Any] | None:
    """An event's data as a JSON object, or None (invalid JSON, or not an object)."""

    try:
        obj = sse.loads(data)
    except ValueError:
        return None
    return obj if type(obj) is dict else None


def object_of(data: str | None) -> dict[str, Any]:
    """An event's data as a JSON object; {} for anything else (read only where an ending needs it)."""

    if data is None:
        return {}
    try:
        obj = sse.loads(data)
    except ValueError:
        return {}
    return obj if isinstance(obj, dict) else {}


class ModelRewrite:
    """The upstream's model name → the client's, in a JSON object or an event's data."""

    def __init__(self, upstream: str, client: str) -> None:
        self.upstream = upstream
        self.client = client
        # First occurrence only, and only as a JSON string value of a "model" key: quotes inside
        # JSON strings are escaped, so this cannot match inside text, arguments or ids.
        name, new = sse.dumps(upstream), sse.dumps(client)
        self._compact = f'"model":{name}'  # how nearly every upstream writes it: a plain find, no regex
        self._compact_new = f'"model":{new}'
        self._pattern = re.compile(r'("model"\s*:\s*)' + re.escape(name))
        self._replacement = new.replace("\\", "\\\\")

    def in_text(self, data: str) -> str:
        if self._compact in data:
            return data.replace(self._compact, self._compact_new, 1)
        if '"model" ' in data or '"model": ' in data:
            return self._pattern.sub(r"\1" + self._replacement, data, count=1)
        return data

    def in_object(self, obj: Any) -> bool:
        """Rewrite ``obj["model"]`` in place; whether it was the upstream's name (and so changed)."""

        if isinstance(obj, dict) and obj.get("model") == self.upstream:
            obj["model"] = self.client
            return True
        return False


def model_rewrite(upstream: str, client: str) -> ModelRewrite | None:
    return ModelRewrite(upstream, client) if upstream != client else None


class Tap(ABC):
    """``feed(event) -> (IR events, bytes to forward)``; ``ending(error)`` closes a broken stream."""

    LIGHT = False  # whether the protocol's tap reads some deltas light (then it follows the open block)

    def __init__(self, decoder: StreamDecoder, rewrite: ModelRewrite | None) -> None:
        self.decoder = decoder
        self.rewrite = rewrite
        self.broken = False  # an unreadable event was met: nothing after it is forwarded
        self.finished = False  # the upstream reported how the response finished (IR Finish)
        self.reported_error: ir.Error | None = None  # one the upstream reported in its protocol (forwarded)
        self.final: dict[str, Any] | None = None  # as streams.StreamEncoder.final, of the forwarded stream
        # The block the decoder has open, as its events said (IR index, kind): the one a light delta
        # may belong to. None when no block is open or the stream has finished or failed.
        self.lane: tuple[int, ir.BlockKind] | None = None
        self._ended = False

    def feed(self, event: SSEEvent) -> tuple[list[ir.Event], bytes]:
        if self.lane is not None:
            events = self._light(event)
            if events is not None:  # content deltas: nothing for _note, the stream is not broken
                return events, self._forward_light(event)
        events = self.decoder.feed(event)
        if self.LIGHT:
            self._track(events)
        if self.broken or not self._note(events):
            return events, b""
        return events, self._forward(event)

    def _light(self, event: SSEEvent) -> list[ir.Event] | None:
        """The decoder's events for a plain content delta of the open block (``self.lane``), made
        without the decoder: deltas (``BlockDelta``) only; None for any other event (the decoder
        reads it)."""

        return None

    def _forward_light(self, event: SSEEvent) -> bytes:
        """``_forward`` for an event ``_light`` read: a tap may skip what it reads only of others."""

        return self._forward(event)

    def _track(self, events: list[ir.Event]) -> None:
        """Follow the decoder's open block: a block starts and stops only where its events say so."""

        for e in events:
            if isinstance(e, ir.BlockStart):
                self.lane = None if self._ended else (e.index, e.kind)
            elif isinstance(e, ir.BlockStop):
                self.lane = None
            elif isinstance(e, (ir.Finish, ir.Error)):
                self.lane, self._ended = None, True

    def finish(self) -> list[ir.Event]:
        events = self.decoder.finish()  # a decoder may hold the finish back until the end (usage after it)
        self._note(events)
        return events

    def _note(self, events: list[ir.Event]) -> bool:
        """Record what ``events`` say of the stream; False when they say it broke."""

        for e in events:
            if isinstance(e, ir.Finish):
                self.finished = True
            elif isinstance(e, ir.Error):
                if e.transport:
                    self.broken = True
                    return False
                self.reported_error = e
        return True

    def ending(self, error: ir.Error | None) -> bytes:
        """What the client still needs for a correct end: nothing when the upstream's own
        terminator went out; the terminator alone when the response had finished; else the
        protocol's error ending for ``error`` (a truncation when there is none)."""

        if self._terminated():
            return b""
        if error is None and (self.finished or self.reported_error is not None):
            return self._terminator()
        return self._error_ending(error or ir.transport_error(ir.TransportFailure.TRUNCATED, NO_FINISH))

    @abstractmethod
    def _forward(self, event: SSEEvent) -> bytes:
        """Note what the event changes in the stream's state; its bytes for the client."""

    @abstractmethod
    def _terminated(self) -> bool: ...

    @abstractmethod
    def _terminator(self) -> bytes: ...

    @abstractmethod
    def _error_ending(self, error: ir.Error) -> bytes: ...
