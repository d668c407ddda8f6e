"""OpenAI's error envelope (the Responses API uses Chat's), and errors inside a stream.

Rendered: ``{"error": {"message", "type", "param", "code"}}``. Parsed: whatever an
upstream sent (the envelope, a bare string, a stream ``error`` event with the
fields at top level, plain text) → :class:`ir.Error`. A failed response carries
``error: {code, message}`` where ``code`` is one of a closed list.
"""

from __future__ import annotations

from typing import Any

from .. import ir, sse

# HTTP status → the error type an OpenAI client expects.
_TYPES_BY_STATUS: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "insufficient_quota",
    403: "permission_error",
    404: "not_found_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    529: "server_error",
}
_DEFAULT_TYPE = "server_error"

# Error code/type names seen inside a 200 stream → the HTTP status they stand for.
_STATUS_BY_NAME: dict[str, int] = {
    "rate_limit_exceeded": 429, "rate_limit_error": 429, "insufficient_quota": 429,
    "server_error": 500, "internal_error": 500, "api_error": 500,
    "invalid_prompt": 400, "invalid_request_error": 400, "context_length_exceeded": 400,
    "invalid_api_key": 401, "authentication_error": 401,
    "permission_error": 403, "overloaded_error": 529, "overloaded": 529,
}
UNKNOWN_STATUS = 502

# ``Response.error.code`` values the API documents (openai-python's ResponseError).
RESPONSE_ERROR_CODES = frozenset({
    "server_error", "rate_limit_exceeded", "invalid_prompt", "vector_store_timeout",
    "invalid_image", "invalid_image_format", "invalid_base64_image", "invalid_image_url",
    "image_too_large", "image_too_small", "image_parse_error", "image_content_policy_violation",
    "invalid_image_mode", "image_file_too_large", "unsupported_image_media_type",
    "empty_image_file", "failed_to_download_image", "image_file_not_found",
})


def default_type(status: int) -> str:
    return _TYPES_BY_STATUS.get(status, _DEFAULT_TYPE)


def render_error(status: int, message: str, error_type: str | None = None,
                 param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type or default_type(status),
                      "param": param, "code": None}}


def status_of(err: dict[str, Any]) -> int:
    """The HTTP status an error object from a stream stands for (by code, then type)."""

    for key in ("code", "type"):
        name = err.get(key)
        if isinstance(name, str) and name in _STATUS_BY_NAME:
            return _STATUS_BY_NAME[name]
    return UNKNOWN_STATUS


def error_from_object(err: Any, status: int | None = None) -> ir.Error:
    """One error object (``{"code", "message", "type", "param"}``) → ir.Error.

    ``status`` None means "infer it from the code" (an error inside a 200 stream).
    """

    if not isinstance(err, dict):
        final = UNKNOWN_STATUS if status is None else status
        text = err if isinstance(err, str) and err else f"upstream error (HTTP {final})"
        return ir.Error(message=text, error_type=default_type(final), status=final)
    final = status_of(err) if status is None else status
    message = err.get("message")
    if not isinstance(message, str) or not message:
        message = f"upstream error (HTTP {final})"
    etype = err.get("type")
    code = err.get("code")
    if not isinstance(etype, str) or not etype or etype == "error":
        etype = code if isinstance(code, str) and code else default_type(final)
    return ir.Error(message=message, error_type=etype, status=final,
                    code=None if code is None or isinstance(code, (dict, list)) else str(code))


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
    """``Response.error`` for a failed response: the code must be a documented one, so a
    provider code outside the list is replaced by the one its status stands for."""

    code = err.code if err.code in RESPONSE_ERROR_CODES else None
    if code is None:
        code = {429: "rate_limit_exceeded", 400: "invalid_prompt"}.get(err.status, "server_error")
    return {"code": code, "message": err.message}


def parse_error(status: int, body: Any) -> ir.Error:
    if isinstance(body, (bytes, bytearray)):
        body = bytes(body).decode("utf-8", "replace")
    if isinstance(body, str):
        text = body.strip()
        if not text:
            return ir.Error(message=f"upstream returned HTTP {status}",
                            error_type=default_type(status), status=status)
        try:
            body = sse.loads(text)
        except ValueError:
            return ir.Error(message=text[:2000], error_type=default_type(status), status=status)
    if isinstance(body, list) and body:
        body = body[0]
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) or (isinstance(err, str) and err):
            return error_from_object(err, status)
    return ir.Error(message=f"upstream returned HTTP {status}", error_type=default_type(status),
                    status=status)
