"""Folding request-log rows into five-minute usage buckets.

``add`` runs inside the log writer's transaction, once per batch: one
``INSERT … ON CONFLICT DO UPDATE`` per (bucket, account) adds the batch's counts
to whatever is there, which is atomic on PostgreSQL and SQLite alike, so any
number of gateway processes can write the same bucket without losing counts.

An account's bucket counts its uses (``accounts.outcomes.account_uses``): every
attempt on it is a request of that account, a failed one an error of it; the
tokens, latency and time to first byte go to the account that ended the request.
``retried`` counts the uses a request moved on from, so that the deployment's
own figures (client requests, and those that failed) are the sums less those:
a request retried twice is three uses of accounts but one request.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from accounts.outcomes import account_uses

from . import histogram
from .buckets import add_counts, add_in_chunks
from .models import BUCKET_SECONDS, UsageBucket

SUMS = ("requests", "errors", "retried", "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens",
        "latency_ms", *histogram.FIELDS)
_REQUESTS, _ERRORS, _RETRIED, _INPUT, _OUTPUT, _CACHED, _REASONING, _LATENCY = range(8)
_TTFB_AT = SUMS.index(histogram.FIELDS[0])


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
    reasoning_tokens: int

    @property
    def attempts(self) -> Sequence[Any]:
        """The attempt trace: ``Attempt`` records, or dicts as the log stores them."""


def bucket_of(when: dt.datetime) -> int:
    ts = int(when.timestamp())
    return ts - ts % BUCKET_SECONDS


def fold(rows: Iterable[LogRow]) -> dict[tuple[int, int], list[int]]:
    """Counts per (bucket start, account id), in the column order of ``SUMS``."""

    acc: dict[tuple[int, int], list[int]] = {}
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
            counts[_INPUT] += r.input_tokens
            counts[_OUTPUT] += r.output_tokens
            counts[_CACHED] += r.cached_tokens
            counts[_REASONING] += r.reasoning_tokens
            counts[_LATENCY] += r.latency_ms
            if r.ttfb_ms is not None:
                counts[_TTFB_AT + histogram.slot(r.ttfb_ms)] += 1
    return acc


def add(rows: Iterable[LogRow], model: Any = UsageBucket) -> None:
    """Add these rows' counts to their buckets (call inside the transaction that writes them)."""

    folded = fold(rows)
    # A migration's backfill hands in its historical model, which may predate a column (retried).
    fields = {f.name for f in model._meta.get_fields()}
    at = [i for i, name in enumerate(SUMS) if name in fields]
    add_counts(model, ["start", "account_id"], [SUMS[i] for i in at],
               [(start, account, *(counts[i] for i in at)) for (start, account), counts in sorted(folded.items())])


def rebuild(log_model: Any, bucket_model: Any = UsageBucket, since: dt.datetime | None = None,
            chunk: int = 20_000) -> int:
    """Recompute the buckets from the log (the migration's backfill, the benchmark's seeding).

    Returns the number of rows read. Meant for a quiet database: rows written
    meanwhile by a running gateway would be counted twice.
    """

    buckets = bucket_model.objects.all()
    rows = log_model.objects.all()
    if since is not None:
        cut = dt.datetime.fromtimestamp(bucket_of(since), dt.timezone.utc)
        buckets = buckets.filter(start__gte=bucket_of(since))
        rows = rows.filter(created_at__gte=cut)
    buckets.delete()
    fields = ("created_at", "account_id", "status", "error_class", "latency_ms", "ttfb_ms",
              "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "attempts")
    return add_in_chunks((Row(*values) for values in rows.values_list(*fields).iterator(chunk_size=chunk)),
                         lambda b: add(b, bucket_model), chunk)


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
