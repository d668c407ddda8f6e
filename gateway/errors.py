"""Gateway errors declare their HTTP status, type and error class once; one function renders every
error the gateway answers with, in the envelope of the path's protocol.

Every refusal goes through :func:`error_body`, whichever layer gives it: the
server's head limit, the drain, the body limit, the API handler and the views.

Where a protocol's own table answers a refusal otherwise, the error declares a protocol-neutral
``kind`` and the protocol module says the difference (its ``ERROR_OVERRIDES``): Anthropic's (the
Claude Code gateway protocol's "Errors") answers a denied model 400 ``invalid_request_error``
instead of 403, a pool without a usable account 529 ``overloaded_error`` instead of 503, and a spent
USD budget with the type ``billing_error``. ``should_retry = False`` sends ``x-should-retry:
false``, which the official SDKs (Anthropic's and OpenAI's alike) obey instead of their own retry
rules: on every 401 the gateway gives (a missing, unknown, revoked or expired credential: no retry
makes it valid, and Claude Code otherwise retries for about three minutes before it asks the user to
sign in again), on a spent USD budget (it frees at a known time, not in seconds), and on every 501.
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
    # What refusal this is, for a protocol whose table answers it otherwise (its module's ERROR_OVERRIDES).
    kind: ClassVar[str | None] = None
    code: str | None = None  # OpenAI's error code, when the error has one
    should_retry: ClassVar[bool | None] = None  # False: x-should-retry: false

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
    should_retry = False
    # The client key that was presented, found by its hash but inactive (a gateway.state.KeyInfo): the
    # refusal is logged under it. Never said to the client, which hears "Invalid API key" either way.
    refused_key: Any = None


class PermissionDenied(GatewayError):
    status = 403
    error_type = "permission_error"
    error_class = ErrorClass.PERMISSION


class ModelDenied(PermissionDenied):
    """A model the caller may not use: 403 in the OpenAI envelopes, 400 in Anthropic's (its table)."""

    kind = "model_denied"


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


class SpendCapReached(OverBudget):
    """A USD budget is spent: no request passes until enough of it frees, at a known time. Anthropic's
    ``billing_error`` (Claude Code prints its message as it is and does not retry), OpenAI's
    ``insufficient_quota`` (its SDKs and Codex do not retry that either)."""

    error_type = "insufficient_quota"
    code = "insufficient_quota"
    kind = "spend_cap"
    should_retry = False


class TooManyInFlight(RateLimited):
    error_class = ErrorClass.CONCURRENCY_LIMITED


class PoolQuotaExhausted(GatewayError):
    """Every account of the provider has used up its rate limits (as their last answers said): a 429
    with ``Retry-After`` at the soonest reset, sent without trying an account that would refuse."""

    status = 429
    error_type = "rate_limit_error"
    error_class = ErrorClass.POOL_QUOTA
class TooManySockets(RateLimited):
    """A client key's cap on open Responses websockets (``GATEWAY_MAX_SOCKETS_PER_KEY``)."""

    error_class = ErrorClass.CONCURRENCY_LIMITED


class NoAccounts(GatewayError):
    status = 503
    error_type = "overloaded_error"
    error_class = ErrorClass.NO_ACCOUNTS
    kind = "no_accounts"  # Anthropic's 529 "upstream at capacity": Claude Code backs off and retries


class NotSupported(GatewayError):
    status = 501
    error_type = "not_supported"
    error_class = ErrorClass.INVALID_REQUEST
    should_retry = False


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


def status_of(err: GatewayError, protocol: str | None = None) -> int:
    """The status ``err`` is answered with on a path of ``protocol``."""

    if isinstance(err, UpstreamFailed):
        return err.upstream_status
    status, _ = _overridden(err, protocol)
    return err.status if status is None else status


def _overridden(err: GatewayError, protocol: str | None) -> tuple[int | None, str | None]:
    """The status and type ``protocol``'s own table answers ``err``'s kind with; None: ``err``'s own."""

    if protocol is None or err.kind is None:
        return None, None
    return registry.get(protocol).ERROR_OVERRIDES.get(err.kind, (None, None))


def headers_of(err: GatewayError, protocol: str | None = None) -> dict[str, str]:
    """The headers that go with ``err``'s answer: its own, and ``x-should-retry: false`` where it says so."""

    if err.should_retry is False or status_of(err, protocol) == 501:
        return {**err.headers, "x-should-retry": "false"}
    return err.headers


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
    _, error_type = _overridden(err, protocol)
    if error_type is not None:  # the protocol's own type; the code goes with the type it was declared beside
        return error_body(protocol, status_of(err, protocol), err.message, error_type, err.param)
    return error_body(protocol, status_of(err, protocol), err.message, err.error_type, err.param, err.code)


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
