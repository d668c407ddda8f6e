"""Spend figures per client key, model and provider, read from the spend buckets (``dashboard.spend``).

Like ``stats``, never a scan of the request log: a window is at most a week of five-minute buckets per
(key, provider, model) that had traffic.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import F, Sum

from .models import SpendBucket
from .spend import usd
from .stats import Window, window_start

FIELDS = ("requests", "errors", "input_tokens", "output_tokens", "cost_nanos")
DIMENSIONS = {"key": "client_key_id", "model": "model", "provider": "provider_id"}


@dataclass
class Spend:
    requests: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_nanos: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def cost(self) -> Decimal:
        return usd(self.cost_nanos)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Spend:
        return cls(**{f: row.get(f) or 0 for f in FIELDS})


def _sums() -> dict[str, Sum]:
    return {f: Sum(f) for f in FIELDS}


def by(window: Window, dimension: str, key_id: int | None = None) -> dict[Any, Spend]:
    """Spend per client key id, model or provider id (``dimension``: a key of ``DIMENSIONS``) in the window,
    all keys' or with ``key_id`` that key's."""

    column = DIMENSIONS[dimension]
    qs = SpendBucket.objects.filter(start__gte=window_start(window))
    if key_id is not None:
        qs = qs.filter(client_key_id=key_id)
    return {row[column]: Spend.from_row(row) for row in qs.values(column).annotate(**_sums()).order_by()}


def total(window: Window, key_id: int | None = None) -> Spend:
    qs = SpendBucket.objects.filter(start__gte=window_start(window))
    if key_id is not None:
        qs = qs.filter(client_key_id=key_id)
    return Spend.from_row(qs.aggregate(**_sums()))


def series(window: Window, key_id: int) -> list[dict[str, float]]:
    """One point per chart step across the window for one key: requests, errors, tokens and cost (USD)."""

    lo = window_start(window)
    rows = (SpendBucket.objects.filter(client_key_id=key_id, start__gte=lo)
            .annotate(t=F("start") - F("start") % window.step).values("t").annotate(**_sums()).order_by())
    found: dict[int, Mapping[str, Any]] = {row["t"]: row for row in rows}
    first = lo - lo % window.step
    points = []
    for t in range(first, int(time.time()) + 1, window.step):
        s = Spend.from_row(found.get(t) or {})
        points.append({"t": t, "requests": s.requests, "errors": s.errors, "tokens": s.tokens,
                       "cost": float(s.cost)})
    return points
