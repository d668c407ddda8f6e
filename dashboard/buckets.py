"""Bucket tables (usage per account, spend per key/provider/model) in tiers: adding counts, and which
buckets a window reads.

A kind of bucket is kept at several widths at once (five minutes, an hour, a day: :data:`Tier`); the writer
adds each batch to every tier, and a read covers its window with the coarsest whole buckets that fit
(:func:`pieces`), so what a page sums grows with the window's length in days, not in five-minute steps.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from itertools import chain

from django.db import connections, router
from django.db.models import F

T = TypeVar("T")
Ident = tuple[Any, ...]  # (bucket start, then the bucket's other identifying columns)


@dataclass(frozen=True)
class Tier:
    seconds: int  # every bucket starts at a multiple of this (Unix time, so days are UTC days)
    model: Any


def add_counts(model: Any, ident: Sequence[str], sums: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Each row (its ``ident`` columns, then its ``sums``) added to its bucket, created if new, in
    one statement per row on either database (``INSERT … ON CONFLICT … DO UPDATE``): buckets are
    written by every process's log writer at once, so a read-then-write would lose counts."""

    if not rows:
        return
    table = model._meta.db_table
    conn = connections[router.db_for_write(model)]
    q = conn.ops.quote_name
    cols = [*ident, *sums]
    updates = ", ".join(f"{q(c)} = {q(table)}.{q(c)} + excluded.{q(c)}" for c in sums)
    sql = (f"INSERT INTO {q(table)} ({', '.join(q(c) for c in cols)}) "
           f"VALUES ({', '.join(['%s'] * len(cols))}) "
           f"ON CONFLICT ({', '.join(q(c) for c in ident)}) DO UPDATE SET {updates}")
    with conn.cursor() as cursor:
        cursor.executemany(sql, rows)


def coarsen(folded: dict[Ident, list[int]], seconds: int) -> dict[Ident, list[int]]:
    """Counts keyed by (start, …) re-keyed to buckets ``seconds`` wide, those that fall together summed."""

    out: dict[Ident, list[int]] = {}
    for (start, *rest), counts in folded.items():
        ident = (start - start % seconds, *rest)
        have = out.get(ident)
        if have is None:
            out[ident] = list(counts)
        else:
            for i, n in enumerate(counts):
                have[i] += n
    return out


def add_to_tiers(tiers: Sequence[Tier], ident: Sequence[str], sums: Sequence[str],
                 folded: dict[Ident, list[int]]) -> None:
    """Counts folded into the finest tier's buckets, added to every tier (the finest first)."""

    for tier in tiers:
        rows = folded if tier is tiers[0] else coarsen(folded, tier.seconds)
        add_counts(tier.model, ident, sums, [(*key, *counts) for key, counts in sorted(rows.items())])


def pieces(tiers: Sequence[Tier], lo: int, now: int, step: int | None = None) -> list[tuple[Tier, int, int | None]]:
    """Which buckets cover the time from ``lo`` (a start of the finest tier) to ``now``, exactly: (tier, first
    start, end or None for "to the end") per tier, finest first. Each tier runs from where the finer one
    stops to its next boundary; the last, the coarsest that still starts by ``now``, runs to the end.
    ``step``: a chart's resolution, which every bucket read must divide (a point per hour cannot be read
    from days)."""

    usable = [t for t in tiers if step is None or step % t.seconds == 0]
    out: list[tuple[Tier, int, int | None]] = []
    at = lo
    for tier, coarser in zip(usable, [*usable[1:], None]):
        until = None if coarser is None else -(-at // coarser.seconds) * coarser.seconds
        if until is None or until > now:
            out.append((tier, at, None))
            break
        if until > at:
            out.append((tier, at, until))
        at = until
    return out


def querysets(tiers: Sequence[Tier], lo: int, now: int, step: int | None = None) -> list[Any]:
    """The bucket rows of :func:`pieces`, one queryset per tier."""

    out = []
    for tier, first, until in pieces(tiers, lo, now, step):
        qs = tier.model.objects.filter(start__gte=first)
        out.append(qs if until is None else qs.filter(start__lt=until))
    return out


def clear(tiers: Sequence[Tier], since: dt.datetime | None) -> dt.datetime | None:
    """Delete the tiers' buckets from ``since`` (all of them without it) before a rebuild; returns the time from
    which the log must be read again (None: all of it). ``since`` is taken back to the start of the coarsest
    tier's bucket, so that no bucket is left holding a part of its counts."""

    if since is None:
        for tier in tiers:
            tier.model.objects.all().delete()
        return None
    widest = max(t.seconds for t in tiers)
    first = int(since.timestamp()) // widest * widest
    for tier in tiers:
        tier.model.objects.filter(start__gte=first).delete()
    return dt.datetime.fromtimestamp(first, dt.timezone.utc)


def grouped(qss: Sequence[Any], sums: Mapping[str, Any], by: Sequence[str] = (),
            step: int | None = None) -> dict[Ident, dict[str, int]]:
    """The ``sums`` (aggregates) of the buckets of :func:`querysets`, per group of the columns ``by`` and, with
    ``step``, of "t" (last): the start of the chart step a bucket falls in. Each tier is summed by the database,
    the tiers are merged here; without any grouping, the one total is under ``()``."""

    if step is not None:
        qss = [qs.annotate(t=F("start") - F("start") % step) for qs in qss]
        by = (*by, "t")
    if not by:
        return _merged((qs.aggregate(**sums) for qs in qss), by)
    return _merged(chain.from_iterable(qs.values(*by).annotate(**sums).order_by() for qs in qss), by)


def _merged(rows: Iterable[Mapping[str, Any]], by: Sequence[str]) -> dict[Ident, dict[str, int]]:
    """Aggregate rows of several tiers merged: the sums of rows with the same values of ``by`` added up, a
    NULL sum (no rows) as 0."""

    out: dict[Ident, dict[str, int]] = {}
    for row in rows:
        ident = tuple(row[c] for c in by)
        have = out.setdefault(ident, {})
        for name, value in row.items():
            if name not in by:
                have[name] = have.get(name, 0) + (value or 0)
    return out


def add_in_chunks(rows: Iterable[T], add: Callable[[list[T]], None], chunk: int) -> int:
    """``rows`` (a rebuild's read of the log) handed to ``add`` ``chunk`` at a time; returns how many."""

    batch: list[T] = []
    total = 0
    for row in rows:
        batch.append(row)
        if len(batch) >= chunk:
            add(batch)
            total += len(batch)
            batch = []
    add(batch)
    return total + len(batch)
