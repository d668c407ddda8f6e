"""Anthropic Messages (``POST /v1/messages``): a :class:`translation.protocol.ProtocolModule`."""

from __future__ import annotations

from collections.abc import Mapping

from ..passthrough import ModelRewrite
from ..protocol import EncodeContext
from .build import build_request, passthrough_request, required_betas
from .decode import AnthropicStreamDecoder
from .encode import AnthropicStreamEncoder
from .errors import ERROR_OVERRIDES, parse_error, render_error
from .request import parse_request
from .response import parse_response, render_response
from .session import SESSION_SIGNALS, cache_ttl, conversation_start
from .tap import AnthropicTap
from .wire import NAME, PATH

COUNT_TOKENS_PATH: str | None = PATH + "/count_tokens"
COMPACT_PATH: str | None = None
KEEPS_STATE = False  # stateless: every request carries the whole conversation
CACHE_KEY_FIELD: str | None = None  # its prompt cache goes by cache_control breakpoints (breakpoints.py)
KEEPALIVE: bytes | None = b'event: ping\ndata: {"type": "ping"}\n\n'  # as its API sends it
COUNTED_BY_CONTENT = True
# Claude Code and the Anthropic SDKs always send Content-Length, and the Claude Code gateway protocol allows
# refusing a body without one (411): a body over the limit is then refused before any of it is read.
LENGTH_REQUIRED = True
FORWARDED_HEADERS: Mapping[str, bool] = {"anthropic-beta": True, "anthropic-version": False}
FORWARDED_QUERY: Mapping[str, bool] = {"beta": True}  # Claude Code posts to /v1/messages?beta=true
BETA_HEADER: str | None = "anthropic-beta"


def credentials(secret: str, version: str) -> dict[str, str]:
    return {"x-api-key": secret, "anthropic-version": version}


def stream_decoder() -> AnthropicStreamDecoder:
    return AnthropicStreamDecoder()


def stream_encoder(ctx: EncodeContext) -> AnthropicStreamEncoder:
    return AnthropicStreamEncoder(ctx)


def stream_tap(rewrite: ModelRewrite | None, client_model: str) -> AnthropicTap:
    return AnthropicTap(rewrite, client_model)


__all__ = [
    "NAME", "PATH", "parse_request", "build_request", "passthrough_request", "parse_response",
    "render_response", "stream_decoder", "stream_encoder", "stream_tap", "render_error", "parse_error",
    "required_betas", "COUNT_TOKENS_PATH", "COMPACT_PATH", "CACHE_KEY_FIELD", "KEEPALIVE", "COUNTED_BY_CONTENT",
    "FORWARDED_HEADERS", "FORWARDED_QUERY", "BETA_HEADER", "credentials", "ERROR_OVERRIDES",
    "LENGTH_REQUIRED", "SESSION_SIGNALS", "conversation_start", "cache_ttl",
    "KEEPS_STATE",
]
