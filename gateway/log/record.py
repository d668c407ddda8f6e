"""One finished request as the request log keeps it, and its spool line (``gateway.log.spool``)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

import orjson
from django.utils import timezone

from accounts.outcomes import ErrorClass, Verdict
from accounts.prices import cost

# The request's META key a websocket turn sets (gateway.endpoints.websocket): its row says so.
TRANSPORT_META = "gateway.transport"


@dataclass
class Attempt:
    account_id: int | None
    account_label: str
    status: int | None  # upstream HTTP status; None for network failures
    verdict: Verdict
    latency_ms: int
    error: str = ""  # redacted excerpt
    tier: str = ""


@dataclass
class LogRecord:
    request_id: str
    client_protocol: str
    client_key_id: int | None = None
    client_key_name: str = ""
    upstream_protocol: str = ""
    provider_id: int | None = None
    account_id: int | None = None
    model_requested: str = ""
    model_sent: str = ""
    stream: bool = False
    transport: str = "http"  # "websocket": a turn on a /v1/responses websocket
    status: int = 0
    error_class: ErrorClass = ErrorClass.NONE
    attempts: list[Attempt] = field(default_factory=list)
    latency_ms: int = 0
    ttfb_ms: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    usage_estimated: bool = False  # the tokens are the gateway's count: the upstream's never came
    finish_reason: str = ""
    request_body: str = ""
    response_body: str = ""
    created_at: Any = field(default_factory=timezone.now)
    cost: Decimal | None = None  # USD: set by the log writer when it prices the row (gateway.log.writer)


def request_cost(record: LogRecord, prices: dict[str, Any] | None) -> Decimal | None:
    """What a request cost by ``prices`` (its provider's table): answered requests only, as the log prices them
    (the request log's cost, the balance and the USD budgets all go by this)."""

    if not 200 <= record.status < 300:
        return None
    return cost(prices, record.model_sent, record.input_tokens, record.output_tokens, record.cached_tokens)


def _decimal(value: Any) -> str:
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError


def to_line(record: LogRecord) -> bytes:
    try:
        return orjson.dumps(record, default=_decimal) + b"\n"
    except orjson.JSONEncodeError:
        # orjson refuses a lone surrogate (a model name can carry one); json escapes it.
        return json.dumps(asdict(record), default=str).encode() + b"\n"


def from_line(line: bytes) -> LogRecord:
    try:
        data: dict[str, Any] = orjson.loads(line)
    except orjson.JSONDecodeError:
        data = json.loads(line)
    data["attempts"] = [Attempt(**{**a, "verdict": Verdict(a["verdict"])}) for a in data["attempts"]]
    data["error_class"] = ErrorClass(data["error_class"])
    data["created_at"] = dt.datetime.fromisoformat(data["created_at"])
    if data.get("cost") is not None:
        data["cost"] = Decimal(data["cost"])
    return LogRecord(**data)
