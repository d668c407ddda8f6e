"""OpenAI Chat Completions (``POST /chat/completions``) ⇄ IR."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..passthrough import ModelRewrite
from ..protocol import EncodeContext
from .build import build_request, passthrough_request
from .decode import ChatStreamDecoder
from .encode import ChatStreamEncoder
from .errors import parse_error, render_error
from .request import parse_request
from .response import parse_response, render_response
from .session import SESSION_SIGNALS, cache_ttl, conversation_start
from .tap import ChatTap

NAME = "openai_chat"
PATH = "/chat/completions"
COUNT_TOKENS_PATH: str | None = None
COMPACT_PATH: str | None = None
KEEPS_STATE = False  # stateless: every request carries the whole conversation
CACHE_KEY_FIELD: str | None = "prompt_cache_key"
KEEPALIVE: bytes | None = None
COUNTED_BY_CONTENT = False
LENGTH_REQUIRED = False  # its protocol promises no Content-Length: a chunked body is read, within the limit
FORWARDED_HEADERS: Mapping[str, bool] = {"openai-beta": False}
FORWARDED_QUERY: Mapping[str, bool] = {}
BETA_HEADER: str | None = None
ERROR_OVERRIDES: Mapping[str, tuple[int | None, str | None]] = {}  # its envelope answers every refusal as declared


def credentials(secret: str, version: str) -> dict[str, str]:
    return {"authorization": f"Bearer {secret}"}


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
    "COUNT_TOKENS_PATH", "COMPACT_PATH", "CACHE_KEY_FIELD", "KEEPALIVE", "COUNTED_BY_CONTENT",
    "FORWARDED_HEADERS", "FORWARDED_QUERY", "BETA_HEADER", "credentials", "ERROR_OVERRIDES",
    "LENGTH_REQUIRED", "SESSION_SIGNALS", "conversation_start", "cache_ttl",
    "KEEPS_STATE",
]
