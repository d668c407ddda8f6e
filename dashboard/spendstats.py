"""Spend figures per client key, team, model and provider, read from the spend buckets (``dashboard.spend``).

Like ``stats``, never a scan of the request log: a window is read from the coarsest buckets that fit each
part of it (``buckets.pieces``), a few dozen rows per (key, provider, model) that had traffic.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet, Sum

from accounts.models import ApiKey, Provider, Team

from .buckets import grouped, querysets
from .spend import TIERS, usd
from .stats import CacheFigures, Window, steps, window_start

FIELDS = ("requests", "errors", "input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens", "cost_nanos")
DIMENSIONS = {"key": "client_key_id", "model": "model", "provider": "provider_id"}


@dataclass
class Spend(CacheFigures):
    requests: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
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

    def add(self, other: Spend) -> None:
        for f in FIELDS:
            setattr(self, f, getattr(self, f) + getattr(other, f))


def _sums() -> dict[str, Sum]:
    return {f: Sum(f) for f in FIELDS}


def _buckets(window: Window, now: int, key_id: int | None = None, step: int | None = None) -> list[QuerySet[Any]]:
    """The window's spend buckets, one queryset per tier (no wider than ``step``), of ``key_id`` if given."""

    qss = querysets(TIERS, window_start(window, now), now, step)
    return qss if key_id is None else [qs.filter(client_key_id=key_id) for qs in qss]


def by(window: Window, dimension: str, key_id: int | None = None) -> dict[Any, Spend]:
    """Spend per client key id, model or provider id (``dimension``: a key of ``DIMENSIONS``) in the window,
    all keys' or with ``key_id`` that key's."""

    column = DIMENSIONS[dimension]
    found = grouped(_buckets(window, int(time.time()), key_id), _sums(), (column,))
    return {ident[0]: Spend.from_row(row) for ident, row in found.items()}


def total(window: Window, key_id: int | None = None) -> Spend:
    return Spend.from_row(grouped(_buckets(window, int(time.time()), key_id), _sums()).get((), {}))


def series(window: Window, key_id: int) -> list[dict[str, float]]:
    """One point per chart step across the window for one key: requests, errors, tokens and cost (USD)."""

    now = int(time.time())
    found = grouped(_buckets(window, now, key_id, window.step), _sums(), step=window.step)
    points = []
    for t in steps(window, now):
        s = Spend.from_row(found.get((t,)) or {})
        points.append({"t": t, "requests": s.requests, "errors": s.errors, "tokens": s.tokens,
                       "cost": float(s.cost)})
    return points


# Sort keys of the client-key list: what a column sorts by, largest first (the name A to Z).
SORTS = {"cost": "cost_nanos", "tokens": "tokens", "requests": "requests", "errors": "errors", "name": "name"}
DEFAULT_SORT = "cost"


def key_rows(window: Window, sort: str) -> list[dict[str, Any]]:
    """Every client key with its spend in the window (keys deleted since: one row of their own), sorted."""

    spent = by(window, "key")
    rows: list[dict[str, Any]] = [{"key": k, "name": k.name, "team": k.team.name if k.team else "",
                                   "spend": spent.pop(k.pk, Spend())}
                                  for k in ApiKey.objects.select_related("team").order_by("name")]
    gone = Spend()
    for spend in spent.values():  # id 0 (no key: refused before authentication) or a deleted key
        gone.add(spend)
    if gone.requests:
        rows.append({"key": None, "name": "(no key or a deleted key)", "spend": gone})
    attr = SORTS[sort]
    if attr == "name":
        rows.sort(key=lambda r: str(r["name"]).lower())
    else:
        rows.sort(key=lambda r: getattr(r["spend"], attr), reverse=True)
    return rows


def team_rows(window: Window) -> list[dict[str, Any]]:
    """Every team with its keys' spend in the window summed (the keys in it now: the same keys whose
    spending its budgets count, ``accounts.models.client_key_ids``), most spent first."""

    rows: dict[int, dict[str, Any]] = {t.pk: {"team": t, "name": t.name, "keys": 0, "spend": Spend()}
                                       for t in Team.objects.order_by("name")}
    if not rows:
        return []  # no teams: the buckets are not read a second time for the keys page
    spent = by(window, "key")
    for key_id, team_id in ApiKey.objects.filter(team__isnull=False).values_list("pk", "team_id"):
        row = rows.get(team_id)
        if row is None:  # a team made since the teams were read
            continue
        row["keys"] += 1
        if key_id in spent:
            row["spend"].add(spent[key_id])
    return sorted(rows.values(), key=lambda r: (-r["spend"].cost_nanos, -r["spend"].requests, r["name"]))


def named(spent: dict[Any, Spend], names: dict[Any, str]) -> list[dict[str, Any]]:
    """Rows for a spend table, each named (a model is its own name), most spent first."""

    return sorted(({"name": names.get(ident) or str(ident or "—"), "spend": s} for ident, s in spent.items()),
                  key=lambda r: (-r["spend"].cost_nanos, -r["spend"].requests, r["name"]))


def provider_names() -> dict[Any, str]:
    return {0: "(none: refused before dispatch)", **dict(Provider.objects.values_list("id", "name"))}
