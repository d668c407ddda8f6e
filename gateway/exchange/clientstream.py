"""What the client is sent for each batch of a stream: the client protocol's encoding of the IR
events (translated), or the upstream's own events (passed through) — and how each ends."""

from __future__ import annotations

from typing import Any, Protocol

from translation import ir, sse
from translation.passthrough import Tap
from translation.streams import StreamEncoder

from .relay import Batch


class ClientStream(Protocol):
    def feed(self, batch: Batch) -> bytes: ...

    def fail(self, error: ir.Error) -> bytes:
        """The gateway ends the stream (idle timeout, stopping, its own failure)."""

    def finish(self) -> bytes:
        """The upstream's body ended."""

    @property
    def final(self) -> dict[str, Any] | None:
        """The whole response object the client's stream ended with, when its protocol has one
        (``translation.streams.StreamEncoder.final``)."""


class Encoding:
    __slots__ = ("_encoder",)

    def __init__(self, encoder: StreamEncoder) -> None:
        self._encoder = encoder

    def feed(self, batch: Batch) -> bytes:
        encoder = self._encoder
        return b"".join([chunk for event in batch.events for chunk in encoder.feed(event)])

    def fail(self, error: ir.Error) -> bytes:
        return b"".join(self._encoder.feed(error))

    def finish(self) -> bytes:
        return b"".join(self._encoder.finish())

    @property
    def final(self) -> dict[str, Any] | None:
        return self._encoder.final


class Forwarding:
    """The upstream's bytes; on a transport failure (or a gateway-made error) the tap's ending."""

    __slots__ = ("_tap", "_ended", "_swap")

    def __init__(self, tap: Tap) -> None:
        self._tap = tap
        self._ended = False
        self._swap: IdSwap | None = None

    def show_id(self, upstream_id: str, shown: str) -> None:
        """The response is shown under ``shown`` instead of the upstream's id (``gateway.exchange.conversation``)."""

        self._swap = IdSwap(upstream_id, shown)

    def feed(self, batch: Batch) -> bytes:
        if self._ended:
            return b""
        wire = batch.wire if self._swap is None else self._swap.in_bytes(batch.wire)
        for event in batch.events:
            if isinstance(event, ir.Error) and (batch.local or event.transport):
                return wire + self.fail(event)
        return wire

    def fail(self, error: ir.Error) -> bytes:
        if self._ended:
            return b""
        self._ended = True
        return self._tap.ending(error)

    def finish(self) -> bytes:
        if self._ended:
            return b""
        self._ended = True
        return self._tap.ending(None)

    @property
    def final(self) -> dict[str, Any] | None:
        final = self._tap.final
        if final is not None and self._swap is not None and final.get("id") == self._swap.old:
            return {**final, "id": self._swap.new}
        return final


class IdSwap:
    """A response id replaced where the stream's events name it: as the value of an ``"id"`` key
    (quotes inside JSON strings are escaped, so text, arguments and other ids cannot match)."""

    __slots__ = ("old", "new", "_pairs")

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new
        quoted_old, quoted_new = sse.dumps(old).encode(), sse.dumps(new).encode()
        self._pairs = [(b'"id":' + quoted_old, b'"id":' + quoted_new),
                       (b'"id": ' + quoted_old, b'"id": ' + quoted_new)]

    def in_bytes(self, wire: bytes) -> bytes:
        for old, new in self._pairs:
            wire = wire.replace(old, new)
        return wire
