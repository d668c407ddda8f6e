"""Adding counts to bucket tables (usage per account, spend per key/provider/model): one upsert."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from django.db import connections, router

T = TypeVar("T")


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
