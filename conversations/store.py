"""Stored responses: written after an answer, read for a follow-up and by the read-back endpoints.

Synchronous: the gateway calls these through ``accounts.db.hop``. Every read is scoped to the
client key that created the response; another key's id reads as unknown.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.db import connection, transaction
from django.utils import timezone

from atrest import seal

from .models import StoredResponse

MAX_CHAIN = 10_000  # a longer chain of previous_response_id is refused rather than walked


class MissingLink(Exception):
    """A response of the chain is not (or no longer) stored: deleted, pruned, or never stored."""

    def __init__(self, response_id: str) -> None:
        super().__init__(response_id)
        self.response_id = response_id


@dataclass
class Entry:
    response_id: str
    client_key_id: int | None
    response: dict[str, Any]
    input_items: list[dict[str, Any]] = field(default_factory=list)
    previous_response_id: str = ""
    model: str = ""
    upstream_protocol: str = ""
    provider_id: int | None = None
    account_id: int | None = None
    upstream_response_id: str = ""

    def output(self) -> list[dict[str, Any]]:
        items = self.response.get("output")
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _dumps(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        # A lone surrogate (which no JSON reader takes back) is kept as U+FFFD, so the row can be read.
        return json.dumps(value, ensure_ascii=False).encode("utf-8", "replace").decode("utf-8", "replace")


def _entry(row: StoredResponse) -> Entry:
    return Entry(response_id=row.response_id, client_key_id=row.client_key_id, response=orjson.loads(row.response),
                 input_items=orjson.loads(row.input_items), previous_response_id=row.previous_response_id,
                 model=row.model, upstream_protocol=row.upstream_protocol, provider_id=row.provider_id,
                 account_id=row.account_id, upstream_response_id=row.upstream_response_id)


def save(entry: Entry) -> None:
    save_many([entry])


# The columns an answer's row is written with; an id already held by its key is replaced whole.
_COLUMNS = ("response_id", "client_key_id", "previous_response_id", "model", "upstream_protocol", "provider_id",
            "account_id", "upstream_response_id", "input_items", "response", "created_at")


def _row(response_id: str, entry: Entry, adapt_time: Callable[[Any], Any]) -> tuple[Any, ...]:
    """An answer's values in ``_COLUMNS``' order, as the database takes them: the two columns of
    content sealed (``atrest``: a raw statement seals what it writes), the time in the backend's
    own form, the rest (text and integers) as they are."""

    return (response_id, entry.client_key_id, entry.previous_response_id, entry.model[:200],
            entry.upstream_protocol, entry.provider_id, entry.account_id, entry.upstream_response_id[:200],
            seal(_dumps(entry.input_items)), seal(_dumps(entry.response)), adapt_time(timezone.now()))


def save_many(entries: list[Entry]) -> None:
    """Store these answers in one transaction (one commit for a group: gateway.exchange.conversation's store).

    An id is unique per client key. The gateway gives a key's answer an id of its own when the
    upstream repeats one the key holds (``taken``), so the same (key, id) again arrives only from two
    processes racing with the same repeated id: the newer answer then replaces the row.

    One ``INSERT … ON CONFLICT … DO UPDATE`` (SQLite and PostgreSQL both take it), its values made
    here: the ORM's ``bulk_create`` spent 40 % more CPU per answer on building its statement, and
    the fields' own ``get_db_prep_save`` a quarter of what was left (80 → 60 µs a row in groups of
    four on SQLite). This runs in the serving process, beside its requests."""

    latest = {(e.client_key_id, e.response_id): e for e in entries}  # within one group too, the last one wins
    adapt_time = connection.ops.adapt_datetimefield_value
    rows = [_row(response_id, entry, adapt_time) for (_, response_id), entry in latest.items()]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.executemany(_UPSERT, rows)


def taken_query(response_id: str, client_key_id: int | None) -> tuple[str, tuple[Any, ...]]:
    """The read of whether this key holds an answer of that id already (a row, or none).

    Asked on every stored passthrough answer before the client sees its id, so it is one indexed
    read in plain SQL: the ORM's ``filter().exists()`` cost ten times as much (217 against 19 µs
    on SQLite; 15 % of a stored exchange's CPU in ``make bench``'s profile_stored). The id is
    always a parameter, never part of the statement."""

    if client_key_id is None:
        return _TAKEN_KEYLESS, (response_id,)
    return _TAKEN, (response_id, client_key_id)


def _quoted(name: str) -> str:
    return f'"{name}"'


# The statements, written once for any thread (Django's ``connection``, looked up on the event loop's
# thread, cost as much as the id check's read itself); both databases take the standard quoting.
_TABLE = _quoted(StoredResponse._meta.db_table)
_UPSERT = (f"INSERT INTO {_TABLE} ({', '.join(map(_quoted, _COLUMNS))}) VALUES ({', '.join(['%s'] * len(_COLUMNS))}) "
           f"ON CONFLICT ({_quoted('client_key_id')}, {_quoted('response_id')}) DO UPDATE SET "
           + ", ".join(f"{_quoted(c)} = EXCLUDED.{_quoted(c)}" for c in _COLUMNS
                       if c not in ("response_id", "client_key_id")))
_TAKEN = f'SELECT 1 FROM {_TABLE} WHERE response_id = %s AND client_key_id = %s LIMIT 1'
_TAKEN_KEYLESS = f'SELECT 1 FROM {_TABLE} WHERE response_id = %s AND client_key_id IS NULL LIMIT 1'


def taken(response_id: str, client_key_id: int | None) -> bool:
    """``taken_query`` on this thread's connection."""

    with connection.cursor() as cursor:
        cursor.execute(*taken_query(response_id, client_key_id))
        return cursor.fetchone() is not None


def find(response_id: str, client_key_id: int | None) -> Entry | None:
    row = StoredResponse.objects.filter(response_id=response_id, client_key_id=client_key_id).first()
    return _entry(row) if row is not None else None


# One query for the whole chain, not one per link: a link per query cost 0.4 ms on SQLite, 120 ms
# for a conversation of 300 turns (2 KB a turn); this query reads it in 17 ms, mostly decoding JSON.
# Both SQLite and PostgreSQL take this recursive CTE.
_CHAIN = """
WITH RECURSIVE link(id, previous_response_id, depth) AS (
    SELECT id, previous_response_id, 0 FROM {table} WHERE response_id = %s AND client_key_id = %s
    UNION ALL
    SELECT r.id, r.previous_response_id, link.depth + 1 FROM {table} r
    JOIN link ON r.response_id = link.previous_response_id AND r.client_key_id = %s
    WHERE link.previous_response_id <> '' AND link.depth < %s
)
SELECT {table}.* FROM {table} JOIN link ON {table}.id = link.id ORDER BY link.depth DESC
"""


def _walk(response_id: str, client_key_id: int | None) -> tuple[list[Entry], str]:
    """The response and those before it that are stored, oldest first, and the id of the first one
    missing going back ("" when the chain reaches its start)."""

    sql = _CHAIN.format(table=StoredResponse._meta.db_table)
    rows = list(StoredResponse.objects.raw(sql, [response_id, client_key_id, client_key_id, MAX_CHAIN]))
    if not rows:
        return [], response_id
    return [_entry(row) for row in rows], rows[0].previous_response_id


def chain(response_id: str, client_key_id: int | None) -> list[Entry]:
    """The response and every one before it, oldest first; MissingLink names the first one missing
    (or the last one read, past MAX_CHAIN links)."""

    entries, missing = _walk(response_id, client_key_id)
    if missing:
        raise MissingLink(missing)
    return entries


def conversation(entries: list[Entry]) -> list[dict[str, Any]]:
    """The items a chain stands for: each response's input, then its output, in order."""

    return [item for entry in entries for item in (*entry.input_items, *entry.output())]


def delete(response_id: str, client_key_id: int | None) -> bool:
    return StoredResponse.objects.filter(response_id=response_id, client_key_id=client_key_id).delete()[0] > 0


def prune(cutoff: dt.datetime, chunk: int = 5_000) -> int:
    """Delete responses stored before ``cutoff``, in chunks (one huge DELETE holds the write lock long)."""

    old = StoredResponse.objects.filter(created_at__lt=cutoff)
    deleted = 0
    while True:
        ids = list(old.order_by("created_at").values_list("id", flat=True)[:chunk])
        if not ids:
            return deleted
        with transaction.atomic():
            deleted += StoredResponse.objects.filter(id__in=ids).delete()[0]


def count_before(cutoff: dt.datetime) -> int:
    return StoredResponse.objects.filter(created_at__lt=cutoff).count()


def input_of(entry: Entry) -> list[dict[str, Any]]:
    """What the model was given for ``entry``: the conversation before it (as far as it is still
    stored), then its own input."""

    before = _walk(entry.previous_response_id, entry.client_key_id)[0] if entry.previous_response_id else []
    return [*conversation(before), *entry.input_items]


def find_with_input(response_id: str, client_key_id: int | None) -> tuple[Entry, list[dict[str, Any]]] | None:
    entry = find(response_id, client_key_id)
    return (entry, input_of(entry)) if entry is not None else None
