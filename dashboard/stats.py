"""The figures the dashboard pages show, read from the usage buckets and the pool tables.

Every window-wide number comes from the usage buckets, the coarsest tier that
fits each part of the window (``buckets.pieces``: at most a few dozen rows per
account whatever the window), never from a scan of the request log.

An account's figures count its uses, failed attempts included; the deployment's
(no account given) count client requests: the buckets' sums less the uses a
request moved on from (``dashboard.rollup``).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, F, QuerySet, Sum
from django.db.models.expressions import Combinable

from accounts.models import Account

from . import histogram
from .buckets import grouped, querysets
from .models import BUCKET_SECONDS
from .rollup import TIERS


@dataclass(frozen=True)
class Window:
    key: str
    label: str
    seconds: int
    step: int  # chart resolution in seconds


WINDOWS = {w.key: w for w in (
    Window("1h", "last hour", 3600, BUCKET_SECONDS),
    Window("24h", "last 24 hours", 86400, 3600),
    Window("7d", "last 7 days", 7 * 86400, 86400),
)}
DEFAULT_WINDOW = "24h"
TOKEN_FIELDS = ("input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens", "reasoning_tokens")
TOTAL_FIELDS = ("requests", "errors", *TOKEN_FIELDS, "latency_ms", "refused")


def cache_hit_rate(cached_tokens: int, input_tokens: int) -> float | None:
    """The share of cacheable input read from the provider's prompt cache: cache reads ÷ input tokens.

    Every input token counts as cacheable (README, "Prices and the prompt cache"): OpenAI caches any prefix of
    1,024 tokens or more unasked, and Anthropic any prefix up to a breakpoint (the gateway places them on
    translated requests); the new part of each turn is the input no cache can hold. None without input."""

    return cached_tokens / input_tokens if input_tokens > 0 else None


class CacheFigures:
    """Cached and uncached input apart, and the hit rate, for figures that sum ``input_tokens`` and
    ``cached_tokens``."""

    input_tokens: int
    cached_tokens: int

    @property
    def uncached_input(self) -> int:
        return max(self.input_tokens - self.cached_tokens, 0)

    @property
    def cache_hit_rate(self) -> float | None:
        return cache_hit_rate(self.cached_tokens, self.input_tokens)


def window_from(key: str | None) -> Window:
    return WINDOWS.get(key or "", WINDOWS[DEFAULT_WINDOW])


def window_start(window: Window, now: float | None = None) -> int:
    """The bucket the window starts in (buckets are whole: the window is up to 5 minutes longer)."""

    lo = int(now if now is not None else time.time()) - window.seconds
    return lo - lo % BUCKET_SECONDS


@dataclass
class Totals(CacheFigures):
    requests: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    latency_ms: int = 0
    refused: int = 0  # of the errors, client refusals (auth, model not allowed, limits, budgets)
    ttfb: list[int] = field(default_factory=lambda: [0] * histogram.SLOTS)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.requests if self.requests else None

    @property
    def failure_rate(self) -> float | None:
        """Errors that were not the client's: upstream failures (and the gateway's own), what ops act on."""

        return (self.errors - self.refused) / self.requests if self.requests else None

    @property
    def refusal_rate(self) -> float | None:
        return self.refused / self.requests if self.requests else None

    @property
    def avg_latency_ms(self) -> float | None:
        return self.latency_ms / self.requests if self.requests else None

    def ttfb_percentile(self, p: float) -> float | None:
        return histogram.percentile(self.ttfb, p)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Totals:
        return cls(**{f: row.get(f) or 0 for f in TOTAL_FIELDS},
                   ttfb=[row.get(f) or 0 for f in histogram.FIELDS])


def _column(name: str, per_account: bool) -> Combinable | str:
    """A summed column: the deployment's requests and errors leave out the uses a request moved on from."""

    if not per_account and name in ("requests", "errors"):
        return F(name) - F("retried")
    return name


def _sums(with_ttfb: bool, per_account: bool) -> dict[str, Sum]:
    names = TOTAL_FIELDS + (histogram.FIELDS if with_ttfb else ())
    return {name: Sum(_column(name, per_account)) for name in names}


def _buckets(window: Window, now: int, account_ids: Collection[int] | None = None,
             step: int | None = None) -> list[QuerySet[Any]]:
    """The window's usage buckets, one queryset per tier (no wider than ``step``), of ``account_ids`` if given."""

    return _since(window_start(window, now), now, account_ids, step)


def _since(lo: int, now: int, account_ids: Collection[int] | None = None,
           step: int | None = None) -> list[QuerySet[Any]]:
    qss = querysets(TIERS, lo - lo % BUCKET_SECONDS, now, step)
    return qss if account_ids is None else [qs.filter(account_id__in=account_ids) for qs in qss]


def steps(window: Window, now: int) -> list[int]:
    """The chart's points across the whole window: the start of each step."""

    lo = window_start(window, now)
    return list(range(lo - lo % window.step, now + 1, window.step))


def totals(window: Window, account_id: int | None = None) -> Totals:
    """The deployment's figures, or with ``account_id`` that account's."""

    sums = _sums(with_ttfb=True, per_account=account_id is not None)
    ids = None if account_id is None else [account_id]
    return Totals.from_row(grouped(_buckets(window, int(time.time()), ids), sums).get((), {}))


def per_account(window: Window, account_ids: Collection[int] | None = None) -> dict[int, Totals]:
    """Each account's figures (only ``account_ids``' when given: a page of the accounts table)."""

    return _per_account(_buckets(window, int(time.time()), account_ids))


def used_since(since: dt.datetime, account_ids: Collection[int]) -> dict[int, tuple[int, int]]:
    """(uses, tokens in + out) of each of ``account_ids`` since a time (taken back to its five-minute bucket):
    the admin's accounts list for today (``GATEWAY_ACCOUNT_USAGE_SINCE``), a page of accounts at a time."""

    used = _per_account(_since(int(since.timestamp()), int(time.time()), account_ids))
    return {account: (t.requests, t.tokens) for account, t in used.items()}


def _per_account(qss: list[QuerySet[Any]]) -> dict[int, Totals]:
    found = grouped(qss, _sums(with_ttfb=False, per_account=True), ("account_id",))
    return {ident[0]: Totals.from_row(row) for ident, row in found.items()}


def series(window: Window, account_id: int | None = None,
           fields: tuple[str, ...] = ("requests", "errors", *TOKEN_FIELDS)) -> list[dict[str, int]]:
    """One point per chart step across the whole window, zeros where nothing happened (plus "tokens": in + out);
    the deployment's, or with ``account_id`` that account's."""

    now = int(time.time())
    ids = None if account_id is None else [account_id]
    sums = {f: Sum(_column(f, account_id is not None)) for f in fields}
    found = grouped(_buckets(window, now, ids, window.step), sums, step=window.step)
    points = [{"t": t, **{f: (found.get((t,)) or {}).get(f, 0) for f in fields}} for t in steps(window, now)]
    if "input_tokens" in fields and "output_tokens" in fields:
        for p in points:
            p["tokens"] = p["input_tokens"] + p["output_tokens"]
    return points


def per_account_series(window: Window, field_name: str = "requests",
                       account_ids: Collection[int] | None = None) -> dict[int, list[int]]:
    """Each account's values per chart step (for the usage table's sparklines), in one query per tier."""

    now = int(time.time())
    starts = steps(window, now)
    index = {t: i for i, t in enumerate(starts)}
    found = grouped(_buckets(window, now, account_ids, window.step), {"v": Sum(field_name)}, ("account_id",),
                    window.step)
    out: dict[int, list[int]] = {}
    for (account, t), row in found.items():
        values = out.setdefault(account, [0] * len(starts))
        at = index.get(t)
        if at is not None:
            values[at] = row["v"]
    return out


def accounts_by_status() -> dict[str, int]:
    counts = {status: 0 for status, _ in Account.STATUS_CHOICES}
    for row in Account.objects.values("status").annotate(n=Count("id")).order_by():
        counts[row["status"]] = row["n"]
    return counts
