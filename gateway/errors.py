"""Gateway errors declare their HTTP status and type once; each client protocol renders them."""

from __future__ import annotations

from typing import Any, ClassVar

import orjson


class GatewayError(Exception):
    status: ClassVar[int] = 500
    error_type: ClassVar[str] = "api_error"  # OpenAI-style type; Anthropic's is derived from status

    def __init__(self, message: str, param: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.headers = headers or {}

    @property
    def error_class(self) -> str:
        return type(self).__name__


class InvalidRequest(GatewayError):
    status = 400
    error_type = "invalid_request_error"


class NestingTooDeep(InvalidRequest):
    """orjson reads 1024 levels of nesting but writes only 254: a body in between cannot be sent on."""

    def __init__(self) -> None:
        super().__init__("The request body nests JSON too deeply")


class AuthenticationFailed(GatewayError):
    status = 401
    error_type = "authentication_error"


class PermissionDenied(GatewayError):
    status = 403
    error_type = "permission_error"


class ModelNotFound(GatewayError):
    status = 404
    error_type = "not_found_error"


class PayloadTooLarge(GatewayError):
    status = 413
    error_type = "request_too_large"


class RateLimited(GatewayError):
    status = 429
    error_type = "rate_limit_error"


class NoAccounts(GatewayError):
    status = 503
    error_type = "overloaded_error"


class UpstreamUnavailable(GatewayError):
    status = 502
    error_type = "api_error"


class UpstreamFailed(GatewayError):
    """An upstream error the pool cannot fix: passed to the client with its own status."""

    error_type = "upstream_error"

    def __init__(self, status: int, message: str, upstream_type: str | None = None,
                 headers: dict[str, str] | None = None, code: str | None = None, param: str | None = None,
                 raw: bytes | None = None) -> None:
        super().__init__(message, param=param, headers=headers)
        self.upstream_status = status
        self.upstream_type = upstream_type
        self.code = code
        self.raw = raw  # the upstream's own JSON error body, for a client of the same protocol

    @property
    def http_status(self) -> int:
        return self.upstream_status


def status_of(err: GatewayError) -> int:
    return err.upstream_status if isinstance(err, UpstreamFailed) else err.status


def type_of(err: GatewayError) -> str | None:
    if isinstance(err, UpstreamFailed):
        return err.upstream_type
    return err.error_type


def render(proto: Any, err: GatewayError) -> dict[str, Any]:
    """The error body in ``proto``'s own envelope."""

    code = err.code if isinstance(err, UpstreamFailed) else None
    return proto.render_error(status_of(err), err.message, type_of(err), err.param,  # type: ignore[no-any-return]
                              code=code)


def passable(raw: bytes | None, secret: str) -> bytes | None:
    """An upstream's error body as a client of its protocol may get it: JSON, without the account's key.

    Anything else (an HTML page or plain text from a proxy) is None: rendered in the client's envelope instead.
    """

    if not raw:
        return None
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return raw.replace(secret.encode(), b"[redacted]") if secret else raw
