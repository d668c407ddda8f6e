"""Keeping reported figures: one row per hour and series (``ReportedFigure``), added to by one
``INSERT … ON CONFLICT DO UPDATE`` per series, so any number of gateway processes may write the same
row; read back per client key for the dashboard. Synchronous ORM code (``accounts.db.hop``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection, transaction
from django.db.models import Q, Sum

from .models import ReportedFigure
from .otlp import Figure

UTC = dt.timezone.utc


def hour_of(when: dt.datetime) -> dt.datetime:
    return when.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def record(key_id: int | None, figures: Iterable[Figure], now: dt.datetime) -> int:
    """Add ``figures`` to the hour of ``now``; returns how many series were written."""

    merged: dict[tuple[str, str, str, str], Figure] = {}
    for f in figures:
        ident = (f.session, f.name, f.detail, f.model)
        seen = merged.get(ident)
        if seen is None:
            merged[ident] = f
        elif f.cumulative:
            merged[ident] = f if f.value > seen.value else seen
        else:
            merged[ident] = Figure(f.name, f.detail, f.model, f.session, seen.value + f.value)
    if not merged:
        return 0
    table = connection.ops.quote_name(ReportedFigure._meta.db_table)
    hour = connection.ops.adapt_datetimefield_value(hour_of(now))
    # A delta adds; a running total keeps the highest seen (both databases read this alike).
    sql = (f"INSERT INTO {table} (hour, client_key_id, session, name, detail, model, value, cumulative) "
           "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
           "ON CONFLICT (hour, client_key_id, session, name, detail, model) DO UPDATE SET value = CASE "
           f"WHEN excluded.cumulative THEN (CASE WHEN excluded.value > {table}.value THEN excluded.value "
           f"ELSE {table}.value END) ELSE {table}.value + excluded.value END")
    rows = [(hour, key_id, f.session, f.name, f.detail, f.model, f.value, f.cumulative)
            for f in sorted(merged.values(), key=lambda f: (f.session, f.name, f.detail, f.model))]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.executemany(sql, rows)
    return len(rows)


# What the dashboard shows per key: (label, metric name, detail or None for all).
SHOWN: Sequence[tuple[str, str, str | None]] = (
    ("sessions", "claude_code.session.count", None),
    ("cost_usd", "claude_code.cost.usage", None),
    ("tokens", "claude_code.token.usage", None),
    ("lines_added", "claude_code.lines_of_code.count", "added"),
    ("lines_removed", "claude_code.lines_of_code.count", "removed"),
    ("commits", "claude_code.commit.count", None),
    ("accepted", "event:tool_decision", "accept"),
    ("rejected", "event:tool_decision", "reject"),
)


def reported_by_key(since: dt.datetime) -> dict[int | None, dict[str, float]]:
    """Per client key, the figures of :data:`SHOWN` its clients reported since ``since``.

    A cumulative series counts with its highest value per session and hour, which over several
    hours of one session overstates it only when the client restarts its totals; Claude Code's
    default (delta) has no such caveat.
    """

    out: dict[int | None, dict[str, float]] = {}
    base = ReportedFigure.objects.filter(hour__gte=hour_of(since))
    for label, name, detail in SHOWN:
        q = Q(name=name)
        if detail is not None:
            q &= Q(detail=detail) | Q(detail__startswith=f"{detail}:")
        for row in base.filter(q).values("client_key_id").annotate(total=Sum("value")):
            out.setdefault(row["client_key_id"], {})[label] = float(row["total"] or 0)
    return out


def prune(before: dt.datetime) -> int:
    deleted: int = ReportedFigure.objects.filter(hour__lt=hour_of(before)).delete()[0]
    return deleted


def figures_of(key_id: int) -> list[Any]:
    """Every series of a key, newest hour first (tests and the key's page)."""

    return list(ReportedFigure.objects.filter(client_key_id=key_id).order_by("-hour", "name", "detail")
                .values("hour", "session", "name", "detail", "model", "value", "cumulative"))
