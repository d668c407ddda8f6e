"""The shapes of the stream translators every protocol package provides (``translation.protocol``
lists the rest): apart, so that the passthrough's tap, which wraps a decoder, and the protocol
module, which makes taps, do not import each other."""

from __future__ import annotations

from typing import Any, Protocol

from . import ir
from .sse import SSEEvent


class StreamDecoder(Protocol):
    """Upstream wire events → IR events. ``finish()`` at end of input."""

    unknown_events: int

    def feed(self, event: SSEEvent) -> list[ir.Event]: ...

    def finish(self) -> list[ir.Event]: ...


class StreamEncoder(Protocol):
    """IR events → client wire bytes (already SSE-framed).

    ``finish()`` closes whatever is open and writes the protocol's terminator,
    whatever the upstream did; after it (or after an ``ir.Error``) the encoder
    emits nothing more.
    """

    # The whole response object the stream ended with, in a protocol whose terminal event carries one
    # (Responses' response.completed / response.incomplete); None until then, and in other protocols.
    final: dict[str, Any] | None

    def feed(self, event: ir.Event) -> list[bytes]: ...

    def finish(self) -> list[bytes]: ...
