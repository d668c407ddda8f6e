"""OpenAI Chat Completions (``POST /chat/completions``) ⇄ IR."""

from __future__ import annotations

from typing import Any

from ..passthrough import ModelRewrite
from ..protocol import EncodeContext
from .build import build_request, passthrough_request
from .decode import ChatStreamDecoder
from .encode import ChatStreamEncoder
from .errors import parse_error, render_error
from .request import parse_request
from .response import parse_response, render_response
from .tap import ChatTap

NAME = "openai_chat"
PATH = "/chat/completions"


def stream_decoder() -> ChatStreamDecoder:
    return ChatStreamDecoder()


def stream_encoder(ctx: EncodeContext) -> ChatStreamEncoder:
    return ChatStreamEncoder(ctx)



def stream_tap(rewrite: ModelRewrite | None, client_model: str) -> ChatTap:
    return ChatTap(rewrite, client_model)

def required_betas(body: dict[str, Any]) -> list[str]:
    """No beta header in this protocol: a built body relies on none."""

    return []


__all__ = [
    "NAME", "PATH", "ChatStreamDecoder", "ChatStreamEncoder", "build_request", "parse_error",
    "parse_request", "parse_response", "passthrough_request", "render_error", "render_response",
    "stream_decoder", "stream_encoder", "stream_tap", "required_betas",
]
