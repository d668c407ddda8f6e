"""The one vocabulary of how an attempt and a request ended, as stored in the request log.

An attempt's verdict (``Attempt.verdict`` in the log's attempt trace) and a
request's error class (``RequestLog.error_class``) were free strings minted where
they happened; they are these enums now, with labels the dashboard shows. And
what a request counts against each account it used (:func:`account_uses`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import models


class Verdict(models.TextChoices):
    """What became of one attempt on one account. A classification rule chooses one of
    RETURN, RETRY and DISABLE; the dispatch loop sets the others."""

    OK = "ok", "answered"
    RETURN = "return", "error returned to the client"
    RETRY = "retry", "retried on the next account"
    DISABLE = "disable", "account disabled, retried"
    NETWORK = "network", "network failure, retried"
    MALFORMED = "malformed", "malformed answer, retried"


RULE_ACTIONS = (Verdict.RETURN, Verdict.RETRY, Verdict.DISABLE)


class ErrorClass(models.TextChoices):
    """Why a request did not end well ("" when it did)."""

    NONE = "", "—"
    INVALID_REQUEST = "invalid_request", "invalid request"
    AUTHENTICATION = "authentication_failed", "authentication failed"
    PERMISSION = "permission_denied", "model not allowed for the key"
    MODEL_NOT_FOUND = "model_not_found", "model not found"
    PAYLOAD_TOO_LARGE = "payload_too_large", "request too large"
    RATE_LIMITED = "rate_limited", "key's requests per minute used up"
    BUDGET_EXCEEDED = "budget_exceeded", "key's budget used up"
    CONCURRENCY_LIMITED = "concurrency_limited", "key's concurrent requests at their cap"
    NO_ACCOUNTS = "no_accounts", "no usable account"
    POOL_QUOTA = "pool_quota", "every account's rate limit used up"
    UNAVAILABLE = "unavailable", "gateway dependency unavailable"
    UPSTREAM_UNREACHABLE = "upstream_unreachable", "upstream unreachable"
    UPSTREAM_ERROR = "upstream_error", "upstream error"
    UPSTREAM_DISCONNECTED = "upstream_disconnected", "upstream disconnected"
    UPSTREAM_TIMEOUT = "upstream_timeout", "upstream timed out"
    UPSTREAM_TRUNCATED = "upstream_truncated", "upstream stream truncated"
    UPSTREAM_MALFORMED = "malformed_upstream", "malformed upstream answer"
    UPSTREAM_TOO_LARGE = "upstream_too_large", "upstream answer too large"
    CLIENT_DISCONNECTED = "client_disconnected", "client disconnected"
    SHUTTING_DOWN = "shutting_down", "gateway shutting down"
    INTERNAL = "internal_error", "gateway failure"

    @classmethod
    def of_stream_error(cls, error_type: str, transport: bool) -> ErrorClass:
        """The class of an error that ended a stream: the transport failure it names, else an
        error the upstream reported."""

        if transport:
            try:
                return cls(error_type)
            except ValueError:
                return cls.UPSTREAM_ERROR
        return cls.UPSTREAM_ERROR


# The gateway refused the client (its key, the model it may use, its limits and budgets, a request it
# could not take): the client's to fix. The other errors are upstream failures (and the gateway's
# own), what ops act on; the overview shows the two apart.
CLIENT_REFUSALS = frozenset({
    ErrorClass.INVALID_REQUEST, ErrorClass.AUTHENTICATION, ErrorClass.PERMISSION, ErrorClass.MODEL_NOT_FOUND,
    ErrorClass.PAYLOAD_TOO_LARGE, ErrorClass.RATE_LIMITED, ErrorClass.BUDGET_EXCEEDED,
    ErrorClass.CONCURRENCY_LIMITED,
})


def client_refusal(error_class: str) -> bool:
    return error_class in CLIENT_REFUSALS


def request_failed(status: int, error_class: str) -> bool:
    """Whether a request counts as an error: not a 2xx, or a stream that ended in an error."""

    return not (200 <= status < 300) or bool(error_class)


@dataclass(frozen=True)
class Use:
    """One use of one account by a request, as the usage counters and buckets count it."""

    account_id: int  # 0: the request reached no account
    failed: bool
    final: bool  # the use that ended the request: it gets the request's tokens and latency


def account_uses(account_id: int | None, status: int, error_class: str, attempts: Sequence[Any]) -> list[Use]:
    """What one request counts against each account it used (the request-log writer's counters and
    the dashboard's usage buckets both count this, from the log's attempt trace).

    Every attempt is a use of its account. An attempt the request moved on from failed (whatever
    its verdict: the request needed another account); the last one failed if its verdict is not
    ok or the request failed. A request without a trace used its final account once, or none.
    ``attempts``: the trace as ``Attempt`` records or as the log stores them (dicts).
    """

    trace = [(_get(a, "account_id") or 0, _get(a, "verdict")) for a in attempts]
    if not trace:
        return [Use(account_id or 0, request_failed(status, error_class), True)]
    last = len(trace) - 1
    return [Use(account, i < last or verdict != Verdict.OK or request_failed(status, error_class), i == last)
            for i, (account, verdict) in enumerate(trace)]


def _get(attempt: Any, name: str) -> Any:
    return attempt[name] if isinstance(attempt, dict) else getattr(attempt, name)
