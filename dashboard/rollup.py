"""Folding request-log rows into usage buckets per account: five minutes, an hour and a day (``TIERS``).

``add`` runs inside the log writer's transaction, once per batch: one
``INSERT … ON CONFLICT DO UPDATE`` per (bucket, account) and tier adds the batch's counts
to whatever is there, which is atomic on PostgreSQL and SQLite alike, so any
number of gateway processes can write the same bucket without losing counts.

An account's bucket counts its uses (``accounts.outcomes.account_uses``): every
attempt on it is a request of that account, a failed one an error of it; the
tokens, latency and time to first byte go to the account that ended the request.
``retried`` counts the uses a request moved on from, so that the deployment's
own figures (client requests, and those that failed) are the sums less those:
a request retried twice is three uses of accounts but one request. ``refused`` counts
the failed requests the gateway refused the client (``accounts.outcomes.CLIENT_REFUSALS``),
told apart from upstream failures on the overview.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from accounts.outcomes import account_uses, client_refusal

from . import histogram
from .buckets import Tier, add_in_chunks, add_to_tiers, clear
from .models import BUCKET_SECONDS, DAY_SECONDS, HOUR_SECONDS, UsageBucket, UsageDay, UsageHour

TIERS = (Tier(BUCKET_SECONDS, UsageBucket), Tier(HOUR_SECONDS, UsageHour), Tier(DAY_SECONDS, UsageDay))

SUMS = ("requests", "errors", "retried", "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens",
        "latency_ms", "cache_write_tokens", *histogram.FIELDS, "refused")
_REQUESTS, _ERRORS, _RETRIED, _INPUT, _OUTPUT, _CACHED, _REASONING, _LATENCY, _CACHE_WRITE = range(9)
_TTFB_AT = SUMS.index(histogram.FIELDS[0])
_REFUSED = SUMS.index("refused")


class LogRow(Protocol):
    created_at: dt.datetime
    account_id: int | None
    status: int
    error_class: str
    latency_ms: int
    ttfb_ms: int | None
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int

    @property
    def attempts(self) -> Sequence[Any]:
        """The attempt trace: ``Attempt`` records, or dicts as the log stores them."""


def bucket_of(when: dt.datetime) -> int:
    ts = int(when.timestamp())
    return ts - ts % BUCKET_SECONDS


def fold(rows: Iterable[LogRow]) -> dict[tuple[Any, ...], list[int]]:
    """Counts per five-minute (bucket start, account id), in the column order of ``SUMS``."""

    acc: dict[tuple[Any, ...], list[int]] = {}
    for r in rows:
        bucket = bucket_of(r.created_at)
        for use in account_uses(r.account_id, r.status, r.error_class, r.attempts):
            key = (bucket, use.account_id)
            counts = acc.get(key)
            if counts is None:
                counts = acc[key] = [0] * len(SUMS)
            counts[_REQUESTS] += 1
            counts[_ERRORS] += use.failed
            if not use.final:
                counts[_RETRIED] += 1
                continue
            counts[_REFUSED] += client_refusal(r.error_class)
            counts[_INPUT] += r.input_tokens
            counts[_OUTPUT] += r.output_tokens
            counts[_CACHED] += r.cached_tokens
            counts[_REASONING] += r.reasoning_tokens
            counts[_LATENCY] += r.latency_ms
            counts[_CACHE_WRITE] += r.cache_write_tokens
            if r.ttfb_ms is not None:
                counts[_TTFB_AT + histogram.slot(r.ttfb_ms)] += 1
    return acc


def add(rows: Iterable[LogRow], tiers: Sequence[Tier] = TIERS) -> None:
    """Add these rows' counts to their buckets in every tier (call inside the transaction that writes them)."""

    folded = fold(rows)
    # A migration's backfill hands in its historical models, which may predate a column (retried).
    fields = {f.name for f in tiers[0].model._meta.get_fields()}
    at = [i for i, name in enumerate(SUMS) if name in fields]
    if len(at) < len(SUMS):
        folded = {key: [counts[i] for i in at] for key, counts in folded.items()}
    add_to_tiers(tiers, ["start", "account_id"], [SUMS[i] for i in at], folded)


def rebuild(log_model: Any, tiers: Sequence[Tier] = TIERS, since: dt.datetime | None = None,
            chunk: int = 20_000) -> int:
    """Recompute the buckets of every tier from the log (a migration's backfill, the tests), since a time
    (``buckets.clear``) or all of them. Returns the number of rows read. Meant for a quiet database:
    rows written meanwhile by a running gateway would be counted twice.
    """

    cut = clear(tiers, since)
    rows = log_model.objects.all() if cut is None else log_model.objects.filter(created_at__gte=cut)
    # A migration's backfill hands in its historical log model, which may predate a column (cache writes).
    fields = logged_fields(log_model, ROW_FIELDS)
    read = rows.values_list(*fields).iterator(chunk_size=chunk)
    return add_in_chunks((Row(**dict(zip(fields, values))) for values in read), lambda b: add(b, tiers), chunk)


def logged_fields(log_model: Any, wanted: Sequence[str]) -> list[str]:
    """Those of ``wanted`` the log model has (a historical one may predate some)."""

    fields = log_model._meta.concrete_fields
    have = {f.name for f in fields} | {f.attname for f in fields}
    return [name for name in wanted if name in have]


@dataclass(slots=True)
class Row:
    """A log row reduced to what the buckets count (``RequestLog`` instances fit ``LogRow`` as they are)."""

    created_at: dt.datetime
    account_id: int | None
    status: int
    error_class: str
    latency_ms: int
    ttfb_ms: int | None
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    attempts: list[Any]
    cache_write_tokens: int = 0


ROW_FIELDS = ("created_at", "account_id", "status", "error_class", "latency_ms", "ttfb_ms", "input_tokens",
              "output_tokens", "cached_tokens", "reasoning_tokens", "attempts", "cache_write_tokens")
