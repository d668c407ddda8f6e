"""The Responses error shapes: OpenAI's envelope (shared, see ``openai_errors``) and errors inside a stream.

Rendered: ``{"error": {"message", "type", "param", "code"}}``. Parsed: whatever an
upstream sent (the envelope, a bare string, a stream ``error`` event with the
fields at top level, plain text) → :class:`ir.Error`. A failed response carries
``error: {code, message}``.
"""

from __future__ import annotations

from typing import Any

from .. import ir
from ..openai_errors import UNKNOWN_STATUS, default_type, error_from_object, parse_error, render_error

__all__ = ["default_type", "error_from_object", "failed_error", "parse_error", "render_error",
           "response_error", "stream_error"]


def stream_error(data: dict[str, Any]) -> ir.Error:
    """A stream ``error`` event: fields at top level (the documented shape) or nested
    under ``error`` (what api.openai.com actually sent in our recording)."""

    nested = data.get("error")
    return error_from_object(nested if isinstance(nested, dict) else data)


def failed_error(response: dict[str, Any]) -> ir.Error:
    """The ``error`` of a ``response.failed`` response object."""

    err = response.get("error")
    if isinstance(err, dict):
        return error_from_object(err)
    return ir.Error(message="upstream response failed", error_type=default_type(UNKNOWN_STATUS),
                    status=UNKNOWN_STATUS)


def response_error(err: ir.Error) -> dict[str, Any]:
    """``Response.error`` for a failed response. The upstream's own code stays, even one
    outside the SDK's closed list: the API itself sends such codes there (our recorded
    ``openai-error.1`` stream fails with ``insufficient_quota``), and clients act on the code
    (``context_length_exceeded`` is how an agent learns to compact, not the message text).
    Without one (numbers are HTTP statuses, not codes), the code its status stands for."""

    code = err.code if err.code and not err.code.isdigit() else None
    if code is None:
        code = {429: "rate_limit_exceeded", 400: "invalid_prompt"}.get(err.status, "server_error")
    return {"code": code, "message": err.message}


