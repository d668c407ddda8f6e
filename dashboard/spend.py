"""Folding request-log rows into spend buckets per client key, provider and model, with the cost: five
minutes, an hour and a day (``TIERS``).

``add`` is a log-writer sink (``GATEWAY_LOG_SINKS``), run inside the writer's transaction once per batch:
one ``INSERT … ON CONFLICT DO UPDATE`` per bucket row and tier adds the batch's counts to whatever is there, so any
number of gateway processes can write the same bucket (``dashboard.rollup`` does the same per account).
The cost is the one the writer priced the row at (``gateway.log.writer.request_cost``), in nano-dollars.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any, Protocol

from django.db.models import Sum

from accounts.budgetwindows import Subject
from accounts.models import client_key_ids
from accounts.outcomes import request_failed

from .buckets import Tier, add_in_chunks, add_to_tiers, clear, grouped, querysets
from .models import BUCKET_SECONDS, DAY_SECONDS, HOUR_SECONDS, SpendBucket, SpendDay, SpendHour
from .rollup import bucket_of, logged_fields

TIERS = (Tier(BUCKET_SECONDS, SpendBucket), Tier(HOUR_SECONDS, SpendHour), Tier(DAY_SECONDS, SpendDay))

SUMS = ("requests", "errors", "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "cost_nanos",
        "cache_write_tokens")
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
    cache_write_tokens: int
    reasoning_tokens: int
    cost: Decimal | None


def nanos(usd: Decimal | None) -> int:
    return int(usd * NANOS) if usd else 0


def usd(nanos_: int | None) -> Decimal:
    return Decimal(nanos_ or 0) / NANOS


def spent_by_slice(subject: Subject, since: dt.datetime, width: int) -> dict[int, Decimal]:
    """What a client key (or a team: its keys) spent per slice of ``width`` seconds since a time (a rolling
    budget's first slice), for the floor under its USD budgets (``GATEWAY_USD_SPENT``): summed by the
    database from the widest buckets no wider than a slice (a month of 12-hour slices reads hours, not
    five-minute buckets)."""

    keys = client_key_ids(subject)
    qss = [qs.filter(client_key_id__in=keys) for qs in querysets(TIERS, bucket_of(since), int(time.time()), width)]
    spent = grouped(qss, {"spent": Sum("cost_nanos")}, step=width)
    return {ident[0]: usd(row["spent"]) for ident, row in spent.items()}


def fold(rows: Iterable[SpendRow]) -> dict[tuple[Any, ...], list[int]]:
    """Counts per five-minute (bucket start, key id, provider id, model), in the column order of ``SUMS``."""

    acc: dict[tuple[Any, ...], list[int]] = {}
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
        counts[7] += getattr(r, "cache_write_tokens", 0)  # a migration's historical log rows may predate it
    return acc


def add(rows: Iterable[SpendRow], tiers: Sequence[Tier] = TIERS) -> None:
    """Add these rows' counts to their buckets in every tier (call inside the transaction that writes them)."""

    folded = fold(rows)
    # A migration's backfill hands in its historical models, which may predate a column (cache writes).
    fields = {f.name for f in tiers[0].model._meta.get_fields()}
    at = [i for i, name in enumerate(SUMS) if name in fields]
    if len(at) < len(SUMS):
        folded = {key: [counts[i] for i in at] for key, counts in folded.items()}
    add_to_tiers(tiers, ["start", "client_key_id", "provider_id", "model"], [SUMS[i] for i in at], folded)


def rebuild(log_model: Any, tiers: Sequence[Tier] = TIERS, since: dt.datetime | None = None,
            chunk: int = 20_000) -> int:
    """Recompute the buckets of every tier from the log since a time (``buckets.clear``) or all of them;
    returns the rows read. Meant for a quiet database: rows written meanwhile by a running
    gateway would be counted twice.
    """

    cut = clear(tiers, since)
    rows = log_model.objects.all() if cut is None else log_model.objects.filter(created_at__gte=cut)
    fields = logged_fields(log_model, ("created_at", "client_key", "provider", "model_requested", "status", "error_class",
                                       "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "cost",
                                       "cache_write_tokens"))
    return add_in_chunks(rows.only(*fields).iterator(chunk_size=chunk), lambda b: add(b, tiers), chunk)
