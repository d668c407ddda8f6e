"""Anthropic Messages (``POST /v1/messages``): a :class:`translation.protocol.ProtocolModule`."""

from __future__ import annotations

from ..passthrough import ModelRewrite
from ..protocol import EncodeContext
from .build import build_request, passthrough_request, required_betas
from .decode import AnthropicStreamDecoder
from .encode import AnthropicStreamEncoder
from .errors import parse_error, render_error
from .request import parse_request
from .response import parse_response, render_response
from .tap import AnthropicTap
from .wire import NAME, PATH


def stream_decoder() -> AnthropicStreamDecoder:
    return AnthropicStreamDecoder()


def stream_encoder(ctx: EncodeContext) -> AnthropicStreamEncoder:
    return AnthropicStreamEncoder(ctx)


def stream_tap(rewrite: ModelRewrite | None, client_model: str) -> AnthropicTap:
    return AnthropicTap(rewrite, client_model)


__all__ = [
    "NAME", "PATH", "parse_request", "build_request", "passthrough_request", "parse_response",
    "render_response", "stream_decoder", "stream_encoder", "stream_tap", "render_error", "parse_error",
    "required_betas",
]
