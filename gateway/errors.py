"""Gateway errors declare their HTTP status, type and error class once; one function renders every
error the gateway answers with, in the envelope of the path's protocol.

Every refusal goes through :func:`error_body`, whichever layer gives it: the
server's head limit, the drain, the body limit, the API handler and the views.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from accounts.outcomes import ErrorClass
from accounts.redact import redact, without_secret
from translation import registry


class GatewayError(Exception):
    status: ClassVar[int] = 500
    error_type: ClassVar[str] = "api_error"  # OpenAI-style type; Anthropic's is derived from status
    error_class: ClassVar[ErrorClass] = ErrorClass.INTERNAL

    def __init__(self, message: str, param: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.headers = headers or {}


class InvalidRequest(GatewayError):
    status = 400
    error_type = "invalid_request_error"
    error_class = ErrorClass.INVALID_REQUEST


class NestingTooDeep(InvalidRequest):
    """orjson reads 1024 levels of nesting but writes only 254: a body in between cannot be sent on."""

    def __init__(self) -> None:
        super().__init__("The request body nests JSON too deeply")


class AuthenticationFailed(GatewayError):
    status = 401
    error_type = "authentication_error"
    error_class = ErrorClass.AUTHENTICATION


class PermissionDenied(GatewayError):
    status = 403
    error_type = "permission_error"
    error_class = ErrorClass.PERMISSION


class ModelNotFound(GatewayError):
    status = 404
    error_type = "not_found_error"
    error_class = ErrorClass.MODEL_NOT_FOUND


class NotFound(GatewayError):
    status = 404
    error_type = "not_found_error"
    error_class = ErrorClass.INVALID_REQUEST


class UnknownResponse(GatewayError):
    """A stored response id the gateway does not know for this client key (OpenAI answers it so)."""

    status = 404
    error_type = "invalid_request_error"
    error_class = ErrorClass.INVALID_REQUEST


class MethodNotAllowed(GatewayError):
    status = 405
    error_type = "invalid_request_error"
    error_class = ErrorClass.INVALID_REQUEST


class PayloadTooLarge(GatewayError):
    status = 413
    error_type = "request_too_large"
    error_class = ErrorClass.PAYLOAD_TOO_LARGE


class RateLimited(GatewayError):
    """A client key's limit; the message names which, and the class files it in the request log."""

    status = 429
    error_type = "rate_limit_error"
    error_class = ErrorClass.RATE_LIMITED


class OverBudget(RateLimited):
    error_class = ErrorClass.BUDGET_EXCEEDED


class TooManyInFlight(RateLimited):
    error_class = ErrorClass.CONCURRENCY_LIMITED


class TooManySockets(RateLimited):
    """A client key's cap on open Responses websockets (``GATEWAY_MAX_SOCKETS_PER_KEY``)."""

    error_class = ErrorClass.CONCURRENCY_LIMITED


class NoAccounts(GatewayError):
    status = 503
    error_type = "overloaded_error"
    error_class = ErrorClass.NO_ACCOUNTS


class Unavailable(GatewayError):
    """Something the gateway itself depends on (its database) cannot be reached."""

    status = 503
    error_type = "overloaded_error"
    error_class = ErrorClass.UNAVAILABLE


def unavailable(exc: BaseException) -> Unavailable:
    """What a client is told when the gateway's database cannot be reached (``accounts.db.DatabaseUnavailable``)."""

    return Unavailable("The gateway cannot reach its database just now; try again shortly",
                       headers={"Retry-After": "2"})


class ShuttingDown(GatewayError):
    status = 503
    error_type = "overloaded_error"
    error_class = ErrorClass.SHUTTING_DOWN


class UpstreamUnavailable(GatewayError):
    status = 502
    error_type = "api_error"
    error_class = ErrorClass.UPSTREAM_UNREACHABLE


class UpstreamFailed(GatewayError):
    """An upstream error the pool cannot fix: passed to the client with its own status."""

    error_type = "upstream_error"
    error_class = ErrorClass.UPSTREAM_ERROR

    def __init__(self, status: int, message: str, upstream_type: str | None = None,
                 headers: dict[str, str] | None = None, code: str | None = None, param: str | None = None,
                 raw: bytes | None = None) -> None:
        super().__init__(message, param=param, headers=headers)
        self.upstream_status = status
        self.upstream_type = upstream_type
        self.code = code
        self.raw = raw  # the upstream's own JSON error body, for a client of the same protocol


def status_of(err: GatewayError) -> int:
    return err.upstream_status if isinstance(err, UpstreamFailed) else err.status


def error_body(protocol: str | None, status: int, message: str, error_type: str | None,
               param: str | None = None, code: str | None = None) -> tuple[bytes, str]:
    """The body and content type of an error answer: ``protocol``'s JSON envelope, or plain text
    for a path that is no LLM protocol's (pages, health checks)."""

    if protocol is None:
        return message.encode(), "text/plain; charset=utf-8"
    rendered = registry.get(protocol).render_error(status, message, error_type, param, code=code)
    return orjson.dumps(rendered), "application/json"


def render(protocol: str | None, err: GatewayError) -> tuple[bytes, str]:
    """``err`` as :func:`error_body` renders it; an upstream's own body as it came when it may pass."""

    if isinstance(err, UpstreamFailed):
        if err.raw is not None:
            return err.raw, "application/json"
        return error_body(protocol, err.upstream_status, err.message, err.upstream_type, err.param, err.code)
    return error_body(protocol, err.status, err.message, err.error_type, err.param)


def passable(raw: bytes | None, secret: str) -> bytes | None:
    """An upstream's error body as a client of its protocol may get it: JSON, without the account's key
    in any spelling (``accounts.redact.without_secret``).

    Anything else (an HTML page or plain text from a proxy) is None: rendered in the client's envelope instead.
    """

    if not raw:
        return None
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    # Valid UTF-8 (orjson read it). The key however JSON spells it: an escaped echo reads back as the key.
    return without_secret(raw.decode(), secret).encode() if secret else raw


def upstream_message(message: str, secret: str, body: str = "", status: int = 0) -> str:
    """An upstream's error message as the client may see it; ``body``, ``status``: the error answer
    it was read from, when it came as one.

    A body that is no JSON is no API's error but a page of something in between (a proxy,
    a load balancer), which names the deployment's inside ("could not retrieve
    http://10.1.2.3:8443/v1/..."): the client is told only the status, the attempt trace
    keeps the text.
    """

    if body.strip() and not _is_json(body):
        return f"The upstream answered HTTP {status} with an error page, not an API error"
    return redact(message, [secret]) or "upstream error"


def _is_json(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True
