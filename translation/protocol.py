"""What every protocol package (``openai_chat``, ``anthropic``, ``responses``) provides.

A protocol package is a module satisfying :class:`ProtocolModule`; the gateway
looks it up in :mod:`translation.registry` and never branches on protocol names.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from . import ir
from .session import Signal
from .streams import StreamDecoder, StreamEncoder

if TYPE_CHECKING:
    from .passthrough import ModelRewrite, Tap


@dataclass
class EncodeContext:
    """What an encoder needs to know about the exchange it is answering."""

    model: str  # the model name the client asked for; echoed back to it
    request: ir.Request | None = None
    body: dict[str, Any] = field(default_factory=dict)  # the client's raw body (Responses echoes it)
    id: str | None = None  # fixed response id (tests); generated when None
    created: int = field(default_factory=lambda: int(time.time()))


class ProtocolModule(Protocol):
    NAME: str  # "openai_chat" | "anthropic" | "responses"
    PATH: str  # appended to a provider's version root, e.g. "/chat/completions"
    # What differs by protocol on the gateway's side of the wire, so that the gateway asks rather than branches:
    COUNT_TOKENS_PATH: str | None  # the upstream's token count endpoint, after the version root; None: it has none
    COMPACT_PATH: str | None  # its endpoint that compacts a conversation itself; None: the gateway compacts
    # The upstream keeps a conversation by its response id: a previous_response_id it issued may be sent
    # back to the account that answered it, instead of the conversation written out.
    KEEPS_STATE: bool
    CACHE_KEY_FIELD: str | None  # the request field that routes the upstream's prompt cache (a session's id)
    KEEPALIVE: bytes | None  # the protocol's own keepalive event, once its stream has begun; None: SSE comments
    COUNTED_BY_CONTENT: bool  # a body's input is estimated from its content (Messages' count); else from its size
    # A request body without a Content-Length is refused (411) on its paths (gateway.edge.bodylimit): its
    # clients always send one, and a declared length lets a body over the limit be refused unread.
    LENGTH_REQUIRED: bool
    # The client's headers and query parameters an upstream of this protocol is sent: name -> only when the
    # client speaks this protocol too. BETA_HEADER: where a translated body's required_betas go.
    FORWARDED_HEADERS: Mapping[str, bool]
    FORWARDED_QUERY: Mapping[str, bool]
    BETA_HEADER: str | None
    # The gateway's refusals its own error table answers otherwise, by their kind (gateway.errors'
    # GatewayError.kind: "model_denied", "no_accounts", "spend_cap") -> (status, type); None: as declared.
    ERROR_OVERRIDES: Mapping[str, tuple[int | None, str | None]]
    # The signals that name a conversation (gateway.exchange.session), in the order they are looked for.
    SESSION_SIGNALS: tuple[Signal, ...]

    def credentials(self, secret: str, version: str) -> dict[str, str]:
        """The headers that carry an account's key (``version``: the provider's API version, where its
        protocol sends one)."""

    def parse_request(self, body: Any) -> ir.Request: ...

    def build_request(self, req: ir.Request, model: str, caps: ir.UpstreamCaps) -> dict[str, Any]: ...

    def passthrough_request(self, body: dict[str, Any], model: str, caps: ir.UpstreamCaps) -> dict[str, Any]: ...

    def conversation_start(self, body: Mapping[str, Any]) -> tuple[Any, Any]:
        """What every turn of a conversation resends first: its system part and its first message (None:
        there is none), which name the session, with the model and the tools, when no signal does."""

    def cache_ttl(self, body: Mapping[str, Any]) -> float | None:
        """The seconds ``body`` asks the provider to keep its prompt cache, when longer than its default."""

    def required_betas(self, body: dict[str, Any]) -> list[str]:
        """Beta switches a body this module built relies on (the ``anthropic-beta`` header)."""

    def parse_response(self, body: Any) -> ir.Response: ...

    def render_response(self, resp: ir.Response, ctx: EncodeContext) -> dict[str, Any]: ...

    def stream_decoder(self) -> StreamDecoder: ...

    def stream_encoder(self, ctx: EncodeContext) -> StreamEncoder: ...

    def stream_tap(self, rewrite: ModelRewrite | None, client_model: str) -> Tap:
        """Same protocol on both sides: the stream is forwarded, this reads it (translation.passthrough)."""

    def render_error(self, status: int, message: str, error_type: str | None = None,
                     param: str | None = None, code: str | None = None) -> dict[str, Any]: ...

    def parse_error(self, status: int, body: Any) -> ir.Error: ...
