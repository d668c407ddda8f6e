"""Anthropic's error envelope, both ways."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .. import ir, sse

# https://docs.anthropic.com/en/api/errors#http-errors
TYPE_BY_STATUS: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    501: "not_supported",  # the Claude Code gateway protocol's: "endpoint not available on this backend"
    504: "timeout_error",
    529: "overloaded_error",
}
STATUS_BY_TYPE: dict[str, int] = {error_type: status for status, error_type in TYPE_BY_STATUS.items()}
# An error type we do not know (inside a 200 stream) is the upstream's failure.
DEFAULT_STREAM_STATUS = 502

# The gateway's own refusals (by kind) that the Claude Code gateway protocol's "Errors" table answers
# otherwise than the OpenAI envelopes' habits: (status, type), None where the refusal's own stands.
ERROR_OVERRIDES: Mapping[str, tuple[int | None, str | None]] = {
    "model_denied": (400, "invalid_request_error"),  # a model the caller may not use; 403 elsewhere
    "no_accounts": (529, None),  # no usable account: "upstream at capacity", Claude Code backs off and retries
    "spend_cap": (None, "billing_error"),  # a spent USD budget: Claude Code prints the message, does not retry
}


def type_for_status(status: int) -> str:
    if status in TYPE_BY_STATUS:
        return TYPE_BY_STATUS[status]
    return "api_error" if status >= 500 else "invalid_request_error"


def status_for_type(error_type: str | None) -> int:
    return STATUS_BY_TYPE.get(error_type or "", DEFAULT_STREAM_STATUS)


def anthropic_type(status: int, error_type: str | None) -> str:
    """Keep the caller's type when it is one of Anthropic's, else derive it from the status."""

    if error_type in STATUS_BY_TYPE:
        return error_type
    return type_for_status(status)


def render_error(status: int, message: str, error_type: str | None = None,
                 param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """``{"type":"error","error":{"type","message"}}``; Anthropic has no ``param`` or ``code``
    slot (its own messages name the field in the text, as ours already do), so an envelope
    with extra keys would not be Anthropic's: both are left out."""

    if code == "context_length_exceeded" or (status in (400, 413) and _OPENAI_TOO_LONG.search(message)):
        message = prompt_too_long(message)
    return {"type": "error", "error": {"type": anthropic_type(status, error_type), "message": message}}


# OpenAI's "This model's maximum context length is 128000 tokens. However, your messages resulted in
# 130000 tokens ..." (and its compatible servers' "... requested 130000 tokens ...").
_OPENAI_TOO_LONG = re.compile(r"maximum context length is (\d+) tokens", re.IGNORECASE)
_REQUESTED = re.compile(r"(?:resulted in|requested|you requested|have) (\d+) tokens", re.IGNORECASE)


def prompt_too_long(message: str) -> str:
    """An upstream's context-length error in Anthropic's own words, which Claude Code's recovery
    (compact the conversation, drop old images) matches: ``prompt is too long: N tokens > M maximum``,
    or without the numbers when the message does not give both."""

    if message.lower().startswith("prompt is too long"):
        return message
    limit, used = _OPENAI_TOO_LONG.search(message), _REQUESTED.search(message)
    if limit is not None and used is not None:
        return f"prompt is too long: {used.group(1)} tokens > {limit.group(1)} maximum"
    return f"prompt is too long: {message}"


def _decode(body: Any) -> Any:
    if isinstance(body, (bytes, bytearray)):
        body = bytes(body).decode("utf-8", "replace")
    if isinstance(body, str):
        text = body.strip()
        if text[:1] in ("{", "["):
            try:
                return sse.loads(text)
            except ValueError:
                return text
        return text
    return body


def parse_error(status: int, body: Any) -> ir.Error:
    """An upstream error body of any shape: Anthropic's envelope, OpenAI's
    ``{"error":{"message","type","code"}}``, a bare ``{"message"}``, or text."""

    data = _decode(body)
    if isinstance(data, dict):
        inner = data.get("error")
        if isinstance(inner, dict):
            return _error_from_object(status, inner)
        if isinstance(inner, str):
            return ir.Error(message=inner, error_type=type_for_status(status), status=status)
        return _error_from_object(status, data)
    text = data if isinstance(data, str) else ""
    message = text[:1000] if text else f"upstream returned HTTP {status}"
    return ir.Error(message=message, error_type=type_for_status(status), status=status)


def _error_from_object(status: int, obj: dict[str, Any]) -> ir.Error:
    message = obj.get("message")
    error_type = obj.get("type")
    code = obj.get("code")
    param = obj.get("param")
    if not isinstance(error_type, str) or error_type == "error":
        error_type = type_for_status(status)
    return ir.Error(
        message=message if isinstance(message, str) and message else f"upstream returned HTTP {status}",
        error_type=error_type,
        status=status,
        code=str(code) if isinstance(code, (str, int)) and not isinstance(code, bool) else None,
        param=param if isinstance(param, str) and param else None,
    )


def error_from_event(payload: dict[str, Any]) -> ir.Error:
    """A mid-stream ``event: error``: the HTTP status its type corresponds to."""

    inner = payload.get("error")
    if not isinstance(inner, dict):
        inner = {}
    error_type = inner.get("type")
    message = inner.get("message")
    status = status_for_type(error_type if isinstance(error_type, str) else None)
    return ir.Error(
        message=message if isinstance(message, str) and message else "upstream stream error",
        error_type=error_type if isinstance(error_type, str) else "api_error",
        status=status,
    )
