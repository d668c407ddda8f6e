"""What the client is sent for each batch of a stream: the client protocol's encoding of the IR
events (translated), or the upstream's own events (passed through) — and how each ends."""

from __future__ import annotations

from typing import Any, Protocol

from translation import ir
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

    __slots__ = ("_tap", "_ended")

    def __init__(self, tap: Tap) -> None:
        self._tap = tap
        self._ended = False

    def feed(self, batch: Batch) -> bytes:
        if self._ended:
            return b""
        for event in batch.events:
            if isinstance(event, ir.Error) and (batch.local or event.transport):
                return batch.wire + self.fail(event)
        return batch.wire

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
        return self._tap.final
