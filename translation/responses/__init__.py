"""The OpenAI Responses protocol (``POST /v1/responses``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..passthrough import ModelRewrite
from ..protocol import EncodeContext
from .build import build_request, passthrough_request
from .decode import ResponsesStreamDecoder
from .encode import ResponsesStreamEncoder
from .errors import parse_error, render_error
from .request import parse_request
from .response import parse_response, render_response
from .session import SESSION_SIGNALS, cache_ttl, conversation_start
from .tap import ResponsesTap

NAME = "responses"
PATH = "/responses"
COUNT_TOKENS_PATH: str | None = None
COMPACT_PATH: str | None = "/responses/compact"
KEEPS_STATE = True  # it stores a response (store, on by default) and continues it by previous_response_id
CACHE_KEY_FIELD: str | None = "prompt_cache_key"
KEEPALIVE: bytes | None = None
COUNTED_BY_CONTENT = False
LENGTH_REQUIRED = False  # its protocol promises no Content-Length: a chunked body is read, within the limit
# x-codex-beta-features: Codex's remote_compaction_v2, with which the upstream reads the compaction trigger.
FORWARDED_HEADERS: Mapping[str, bool] = {"openai-beta": False, "x-codex-beta-features": True}
FORWARDED_QUERY: Mapping[str, bool] = {}
BETA_HEADER: str | None = None
ERROR_OVERRIDES: Mapping[str, tuple[int | None, str | None]] = {}  # its envelope answers every refusal as declared


def credentials(secret: str, version: str) -> dict[str, str]:
    return {"authorization": f"Bearer {secret}"}


def stream_decoder() -> ResponsesStreamDecoder:
    return ResponsesStreamDecoder()


def stream_encoder(ctx: EncodeContext) -> ResponsesStreamEncoder:
    return ResponsesStreamEncoder(ctx)



def stream_tap(rewrite: ModelRewrite | None, client_model: str) -> ResponsesTap:
    return ResponsesTap(rewrite, client_model)

def required_betas(body: dict[str, Any]) -> list[str]:
    """No beta header in this protocol: a built body relies on none."""

    return []


__all__ = [
    "NAME", "PATH", "parse_request", "build_request", "passthrough_request", "parse_response",
    "render_response", "stream_decoder", "stream_encoder", "stream_tap", "required_betas", "render_error", "parse_error",
    "COUNT_TOKENS_PATH", "COMPACT_PATH", "CACHE_KEY_FIELD", "KEEPALIVE", "COUNTED_BY_CONTENT",
    "FORWARDED_HEADERS", "FORWARDED_QUERY", "BETA_HEADER", "credentials", "ERROR_OVERRIDES",
    "LENGTH_REQUIRED", "SESSION_SIGNALS", "conversation_start", "cache_ttl",
    "KEEPS_STATE",
]
