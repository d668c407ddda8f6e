"""Folding request-log rows into five-minute spend buckets: per client key, provider and model, with the cost.

``add`` is a log-writer sink (``GATEWAY_LOG_SINKS``), run inside the writer's transaction once per batch:
one ``INSERT … ON CONFLICT DO UPDATE`` per bucket row adds the batch's counts to whatever is there, so any
number of gateway processes can write the same bucket (``dashboard.rollup`` does the same per account).
The cost is the one the writer priced the row at (``gateway.reqlog.request_cost``), in nano-dollars.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, Protocol

from django.db.models import Sum

from accounts.outcomes import request_failed

from .buckets import add_counts, add_in_chunks
from .models import SpendBucket
from .rollup import bucket_of

SUMS = ("requests", "errors", "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "cost_nanos")
NANOS = Decimal(1_000_000_000)


class SpendRow(Protocol):
    created_at: dt.datetime
    client_key_id: int | None
    provider_id: int | None
    model_requested: str
    status: int
    error_class: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    cost: Decimal | None


def nanos(usd: Decimal | None) -> int:
    return int(usd * NANOS) if usd else 0


def usd(nanos_: int | None) -> Decimal:
    return Decimal(nanos_ or 0) / NANOS


def spent_since(key_id: int, since: dt.datetime) -> Decimal:
    """What a client key spent since a time (a budget period's start: whole five-minute buckets), for the
    floor under its USD budgets (``GATEWAY_USD_SPENT``)."""

    nanos_ = SpendBucket.objects.filter(client_key_id=key_id, start__gte=bucket_of(since)).aggregate(
        spent=Sum("cost_nanos"))["spent"]
    return usd(nanos_)


def fold(rows: Iterable[SpendRow]) -> dict[tuple[int, int, int, str], list[int]]:
    """Counts per (bucket start, key id, provider id, model), in the column order of ``SUMS``."""

    acc: dict[tuple[int, int, int, str], list[int]] = {}
    for r in rows:
        ident = (bucket_of(r.created_at), r.client_key_id or 0, r.provider_id or 0, r.model_requested[:200])
        counts = acc.get(ident)
        if counts is None:
            counts = acc[ident] = [0] * len(SUMS)
        counts[0] += 1
        counts[1] += request_failed(r.status, r.error_class)
        counts[2] += r.input_tokens
        counts[3] += r.output_tokens
        counts[4] += r.cached_tokens
        counts[5] += r.reasoning_tokens
        counts[6] += nanos(r.cost)
    return acc


def add(rows: Iterable[SpendRow], model: Any = SpendBucket) -> None:
    """Add these rows' counts to their buckets (call inside the transaction that writes them)."""

    folded = fold(rows)
    add_counts(model, ["start", "client_key_id", "provider_id", "model"], SUMS,
               [(*key, *counts) for key, counts in sorted(folded.items())])


def rebuild(log_model: Any, bucket_model: Any = SpendBucket, since: dt.datetime | None = None,
            chunk: int = 20_000) -> int:
    """Recompute the buckets from the log since a time (the migration's backfill); returns the rows read.

    Meant for a quiet database: rows written meanwhile by a running gateway would be counted twice.
    """

    buckets = bucket_model.objects.all()
    rows = log_model.objects.all()
    if since is not None:
        buckets = buckets.filter(start__gte=bucket_of(since))
        rows = rows.filter(created_at__gte=dt.datetime.fromtimestamp(bucket_of(since), dt.timezone.utc))
    buckets.delete()
    fields = ("created_at", "client_key", "provider", "model_requested", "status", "error_class", "input_tokens",
              "output_tokens", "cached_tokens", "reasoning_tokens", "cost")
    return add_in_chunks(rows.only(*fields).iterator(chunk_size=chunk), lambda b: add(b, bucket_model), chunk)


def spent_by_slice(key_id: int, since: dt.datetime, width: int) -> dict[int, Decimal]:
    """What a client key spent per slice of ``width`` seconds since a time (a rolling budget's first slice),
    for the floor under its USD budgets (``GATEWAY_USD_SPENT``). Grouped by the database: every budget's
    slice width is a multiple of the buckets' five minutes, so a bucket falls wholly in one slice."""

    from django.db.models import F
    from django.db.models.functions import Mod

    rows = (SpendBucket.objects.filter(client_key_id=key_id, start__gte=bucket_of(since))
            .annotate(slice=F("start") - Mod("start", width)).values("slice")
            .annotate(spent=Sum("cost_nanos")).values_list("slice", "spent"))
    return {int(start): usd(nanos_) for start, nanos_ in rows}
