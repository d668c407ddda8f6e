"""What an upstream's silence costs a stream: the one policy that the relay (waiting for the first
content, ``gateway.exchange.relay``) and the client's stream writer (``gateway.exchange.streamwriter``)
both follow.

Silence is filled for the client every ``keepalive`` seconds (``GATEWAY_KEEPALIVE_SECONDS``), so that
neither the client nor a proxy in between takes a slow model for a dead connection: with an SSE
comment, or once the stream has begun with the client protocol's own keepalive event where it has one
(Anthropic's ``ping``: a client's idle timer that counts events, not bytes, sees it, and the SDKs drop
it). Silence past the provider's ``idle_timeout`` ends the stream with one error, a 504, whether it
comes before the first content (then another account may be tried) or after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from translation import ir, sse

STALLED = "upstream sent nothing within its idle timeout"


@dataclass(frozen=True, slots=True)
class IdlePolicy:
    idle_timeout: float  # seconds of upstream silence that end the stream (the provider's)
    keepalive: float  # seconds of silence the client is left without bytes
    ping: bytes | None = None  # the client protocol's keepalive event, once its stream has begun

    def until_stalled(self, idle_for: float) -> float:
        """Seconds left before an upstream silent for ``idle_for`` seconds has stalled."""

        return self.idle_timeout - idle_for

    def wait(self, idle_for: float) -> float:
        """How long to wait for the upstream: until a keepalive is due or it has stalled."""

        return min(self.keepalive, self.idle_timeout - idle_for)

    def stalled(self, idle_for: float) -> bool:
        return idle_for >= self.idle_timeout

    def stall(self) -> ir.Error:
        """The error a stalled upstream ends the stream with."""

        return ir.transport_error(ir.TransportFailure.TIMEOUT, STALLED, 504)

    def filler(self, begun: bool) -> bytes:
        """What a silence is filled with; ``begun``: the client's stream has had its first event."""

        return self.ping if begun and self.ping is not None else sse.comment()
