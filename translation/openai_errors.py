"""OpenAI's error envelope, both ways — shared by Chat Completions and Responses.

Rendered: ``{"error": {"message", "type", "param", "code"}}``. Parsed (``code`` and ``param``
kept): whatever an
upstream sent (OpenAI's envelope, OpenRouter's numeric ``code``, Groq's
``status_code``, a bare string, a list of envelopes, plain text) → :class:`ir.Error`.
"""

from __future__ import annotations

from typing import Any

from . import ir, sse

# HTTP status → (type, code) a client of the OpenAI API expects.
_TYPES_BY_STATUS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("authentication_error", "invalid_api_key"),
    402: ("insufficient_quota", "insufficient_quota"),
    403: ("permission_error", None),
    404: ("not_found_error", None),
    413: ("invalid_request_error", "request_too_large"),
    422: ("invalid_request_error", None),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("server_error", None),
    529: ("server_error", "overloaded"),
}
_DEFAULT_TYPE = ("server_error", None)

# Provider error type/code names → the HTTP status they stand for (for errors inside a 200 stream).
_STATUS_BY_NAME: dict[str, int] = {
    "rate_limit_exceeded": 429, "rate_limit_error": 429, "requests": 429, "tokens": 429,
    "insufficient_quota": 429, "billing_error": 402, "payment_required": 402,
    "invalid_api_key": 401, "authentication_error": 401, "unauthorized": 401,
    "permission_error": 403, "permission_denied": 403,
    "invalid_request_error": 400, "invalid_request": 400, "bad_request": 400,
    "invalid_prompt": 400, "context_length_exceeded": 400,
    "not_found_error": 404, "model_not_found": 404,
    "overloaded_error": 529, "overloaded": 529,
    "server_error": 500, "internal_error": 500, "internal_server_error": 500, "api_error": 500,
}
UNKNOWN_STATUS = 502


def render_error(status: int, message: str, error_type: str | None = None,
                 param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """``code`` is the upstream's own (``context_length_exceeded``) when there is one, else
    the one the status stands for."""

    default_type, default_code = _TYPES_BY_STATUS.get(status, _DEFAULT_TYPE)
    return {"error": {"message": message, "type": error_type or default_type,
                      "param": param, "code": code or default_code}}


def default_type(status: int) -> str:
    return _TYPES_BY_STATUS.get(status, _DEFAULT_TYPE)[0]


def _http_status(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, int) and 400 <= value <= 599:
        return value
    return None


def status_of(err: dict[str, Any]) -> int:
    """The HTTP status an error object stands for: an explicit status, a numeric
    ``code``, else the meaning of its code/type name; unknown → 502."""

    for key in ("status_code", "status", "code"):
        status = _http_status(err.get(key))
        if status is not None:
            return status
    for key in ("code", "type"):
        name = err.get(key)
        if isinstance(name, str) and name in _STATUS_BY_NAME:
            return _STATUS_BY_NAME[name]
    return UNKNOWN_STATUS


def error_from_object(err: Any, status: int | None = None) -> ir.Error:
    """One provider error object (the value of ``"error"``) → ir.Error; ``status`` None
    means "infer it from the object" (an error inside a 200 stream)."""

    if not isinstance(err, dict):
        text = err if isinstance(err, str) and err else "upstream error"
        final = status if status is not None else UNKNOWN_STATUS
        return ir.Error(message=text, error_type=default_type(final), status=final)
    final = status if status is not None else status_of(err)
    message = err.get("message") or err.get("detail")
    if not isinstance(message, str) or not message:
        message = f"upstream error (HTTP {final})"
    etype = err.get("type")
    code = err.get("code")
    if not isinstance(etype, str) or not etype or etype == "error":
        # A stream "error" event names itself, not the failure: its code says more.
        etype = code if isinstance(code, str) and code else default_type(final)
    param = err.get("param")
    return ir.Error(
        message=message,
        error_type=etype,
        status=final,
        code=None if code is None or isinstance(code, (dict, list)) else str(code),
        param=param if isinstance(param, str) and param else None,
    )


def parse_error(status: int, body: Any) -> ir.Error:
    if isinstance(body, (bytes, bytearray)):
        body = bytes(body).decode("utf-8", "replace")
    if isinstance(body, str):
        text = body.strip()
        try:
            body = sse.loads(text) if text else None
        except ValueError:
            return ir.Error(message=text[:2000], error_type=default_type(status), status=status)
    if isinstance(body, list) and body:
        body = body[0]  # Gemini's compatibility layer wraps the envelope in a list
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) or (isinstance(err, str) and err):
            return error_from_object(err, status)
    return ir.Error(message=f"upstream returned HTTP {status}", error_type=default_type(status),
                    status=status)
