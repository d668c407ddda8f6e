"""Anthropic Messages (``POST /v1/messages``): a :class:`translation.protocol.ProtocolModule`."""

from __future__ import annotations

from ..protocol import EncodeContext
from .build import build_request, passthrough_request, required_betas
from .decode import AnthropicStreamDecoder
from .encode import AnthropicStreamEncoder
from .errors import parse_error, render_error
from .request import parse_request
from .response import parse_response, render_response
from .wire import NAME, PATH


def stream_decoder() -> AnthropicStreamDecoder:
    return AnthropicStreamDecoder()


def stream_encoder(ctx: EncodeContext) -> AnthropicStreamEncoder:
    return AnthropicStreamEncoder(ctx)


__all__ = [
    "NAME", "PATH", "parse_request", "build_request", "passthrough_request", "parse_response",
    "render_response", "stream_decoder", "stream_encoder", "render_error", "parse_error", "required_betas",
]
