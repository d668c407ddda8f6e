"""One finished request as the request log keeps it, and its spool line (``gateway.log.spool``)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

import orjson
from django.utils import timezone

from accounts.outcomes import ErrorClass, Verdict
from accounts.prices import Tokens, cost, cost_at, price_for


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
    user_id: int | None = None  # the developer (signed in, or the key's own), their team, their client
    team_id: int | None = None
    surface: str = ""
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
    cached_tokens: int = 0  # cache reads; these and the writes are parts of input_tokens
    cache_write_tokens: int = 0  # written to the provider's prompt cache (Anthropic), every TTL
    cache_write_1h_tokens: int = 0  # of those, written for an hour (priced apart)
    reasoning_tokens: int = 0
    usage_estimated: bool = False  # the tokens are the gateway's count: the upstream's never came
    finish_reason: str = ""
    # What the pick did with the request's session: kept, assigned, moved (and why), and its signal
    # (gateway.exchange.selection); "" without a session.
    affinity: str = ""
    affinity_reason: str = ""
    session_signal: str = ""
    request_body: str = ""
    response_body: str = ""
    # Claude Code's hint headers (signin.hints): sensitive, never logged in plain text.
    cc_request_class: str = ""
    cc_agent_type: str = ""
    cc_prompt_id: str = ""
    cc_settings_checksum: str = field(default="", repr=False)
    created_at: Any = field(default_factory=timezone.now)
    cost: Decimal | None = None  # USD: set by the log writer when it prices the row (gateway.log.writer)
    billing_group: str = ""  # the request tag GATEWAY_BILLING_GROUP_TAG names (Claude Code's attributionProject)


def billed(record: LogRecord) -> bool:
    """Whether a request is priced at all: answered requests only, as the log prices them (the request
    log's cost, the balance and the USD budgets all go by this)."""

    return 200 <= record.status < 300


def request_cost(record: LogRecord, prices: dict[str, Any] | None) -> Decimal | None:
    """What a request cost by ``prices`` (its provider's table), None when unpriced or not :func:`billed`."""

    if not prices or not billed(record):
        return None
    return cost(prices, record.model_sent, tokens_of(record))


def request_costs(batch: Sequence[LogRecord], tables: Mapping[int, dict[str, Any] | None]) -> list[Decimal | None]:
    """Each record's cost from its provider's price table (``tables``: provider id → prices), as
    ``request_cost`` prices it, with each (provider, model)'s price looked up once per batch."""

    price_of: dict[tuple[int, str], dict[str, Any] | None] = {}
    out: list[Decimal | None] = []
    for r in batch:
        pid = r.provider_id
        prices = tables.get(pid) if pid is not None else None
        if pid is None or not prices or not billed(r):
            out.append(None)
            continue
        key = (pid, r.model_sent)
        if key not in price_of:
            price_of[key] = price_for(prices, r.model_sent)
        out.append(cost_at(price_of[key], tokens_of(r)))
    return out


def tokens_of(record: LogRecord) -> Tokens:
    """The record's tokens by how each kind is billed (``accounts.prices``)."""

    return Tokens(input=record.input_tokens, output=record.output_tokens, cache_read=record.cached_tokens,
                  cache_write=record.cache_write_tokens, cache_write_1h=record.cache_write_1h_tokens)


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
