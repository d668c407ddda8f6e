"""The request log and usage counters, written off the hot path.

Request handlers hand a finished :class:`Exchange` record to :meth:`LogWriter.submit`,
which appends it to the spool on disk (``gateway.log.spool``: what a killed
process leaves there is written by the next one) and to a bounded queue in
memory. A writer thread drains the queue in batches: one
INSERT (executemany) for the log rows, one counter UPDATE per account and client key
in the batch (an account counts each of its uses, failed attempts included:
``accounts.outcomes.account_uses``; a client key's last-used time moves on with them), whatever the writer's sinks add in the same transaction (the
dashboard's usage buckets), then a dashboard broadcast. Observers (the Prometheus metrics) see
each record as it is submitted, on the request's thread, and count at the writer's tick. The app object flushes
it when the gateway stops and at interpreter exit, so a clean shutdown loses no
buffered row.

The writer shares the GIL with the request path, so a batch is written with
plain SQL rather than through model instances: the ORM's per-row and per-query
overhead was most of what logging a request cost. What is left per row is kept to
plain tuples, each value adapted once, each price looked up once a batch. Measured
with py-spy (``--gil --threads``, c=16 chat JSON on the bench's stack, a busy 2-core
machine): the writer thread took 5.5-8 % of the serving process's GIL samples and
``submit`` 1 % (the spool's line 0.6 %); of the thread's share, 31 % is the sinks
(the dashboard's buckets) and 23 % the SQL driver's executemany.
"""

from __future__ import annotations

import asyncio
import json
import logging
import operator
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from django.db import InterfaceError, OperationalError, connection, transaction

import atrest
from accounts.db import checked_connections
from accounts.outcomes import ErrorClass, Use, account_uses, request_failed
from accounts.redact import redact

from .record import Attempt, LogRecord, request_costs

if TYPE_CHECKING:
    from accounts.redact import SecretSet

    from .knownsecrets import KnownSecrets
    from .spool import Spool

log = logging.getLogger(__name__)

BATCH_SIZE = 500
# Failures that are the database's (down, restarting, locked), not a record's: the record is kept.
DATABASE_AWAY = (OperationalError, InterfaceError, OSError)
MEMORY_BOUND = 20_000  # records queued in memory; past it (the database away) they wait in the spool only
# The references a row keeps only while what they name exists.
REFERENCES = ("account_id", "provider_id", "client_key_id", "user_id", "team_id")
# The running totals an account and a client key keep, in the order _add counts them.
COUNTERS = ("requests", "errors", "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens",
            "cache_write_tokens")


# Called inside the writer's transaction with each batch (the dashboard's usage rollup).
Sink = Callable[[Sequence[LogRecord]], None]
# Called with each record as it is submitted, on the request's own thread (the Prometheus metrics, which
# only note it there and count a batch at the writer's tick): it must take microseconds, never touch the database.
Observer = Callable[[LogRecord], None]


class LogWriter:
    def __init__(self, batch_seconds: float = 1.0, sinks: Sequence[Sink] = (),
                 body_limit: int | None = None, spool: Spool | None = None,
                 memory_bound: int = MEMORY_BOUND, known_secrets: KnownSecrets | None = None,
                 observers: Sequence[Observer] = (), ticks: Sequence[Callable[[], None]] = ()) -> None:
        """``body_limit``: with body logging on, the characters of a body kept; None keeps none.
        ``known_secrets``: the upstream keys removed from kept bodies (the configuration keeps it current).
        ``ticks``: called on the writer's thread once a batch, whatever the database does (the metrics
        count there what their observer noted)."""

        self.batch_seconds = batch_seconds
        self.sinks = tuple(sinks)
        self.observers = tuple(observers)
        self.ticks = tuple(ticks)
        self.body_limit = body_limit
        self.spool = spool
        self.memory_bound = memory_bound
        self.known_secrets = known_secrets
        self.dropped = 0  # records neither queued nor spooled (memory full and no spool): said in the log
        self._queue: queue.SimpleQueue[tuple[LogRecord, int]] = queue.SimpleQueue()  # (record, spool segment)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self.written = 0

    def keep_body(self, text: str | bytes) -> str:
        known = self.known_secrets
        return capped(text, self.body_limit, known.current if known is not None else ())

    def submit(self, record: LogRecord) -> None:
        for observe in self.observers:
            try:
                observe(record)
            except Exception:  # noqa: BLE001 - a metric must never cost a request its log row
                log.exception("request-log observer %r failed on %s", observe, record.request_id)
        segment = self.spool.append(record) if self.spool is not None else -1
        if self._queue.qsize() < self.memory_bound:
            self._queue.put((record, segment))
        elif segment >= 0:
            self.spool.spill(segment)  # type: ignore[union-attr]  # segment >= 0: there is a spool
        else:
            self.dropped += 1
            log.error("request-log row for %s dropped: %d rows wait and nothing can hold more",
                      record.request_id, self.memory_bound)
        if self._thread is None:
            self._start()

    def start(self) -> None:
        """Start the writer now (it replays what a dead process left in the spool), not at the first row."""

        if self._thread is None:
            self._start()

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="request-log-writer", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        # The thread's own event loop for the dashboard event: async_to_sync would start a
        # thread and a loop (with Redis, a connection too) for every batch.
        self._loop = asyncio.new_event_loop()
        while True:
            # Each batch has a fixed cost (a transaction, the counters, the usage buckets, the live
            # event) and takes the GIL from the request path while it runs: fewer, larger batches
            # measured ~10 % more requests/s than four a second (bench, c=16).
            time.sleep(self.batch_seconds)
            self._tick()
            try:
                self.flush()
            except Exception:  # noqa: BLE001 - the writer must outlive a bad batch; rows were re-queued
                log.exception("request log batch failed; will retry")
                time.sleep(1.0)

    def _tick(self) -> None:
        for tick in self.ticks:
            try:
                tick()
            except Exception:  # noqa: BLE001 - metrics must never stop the log
                log.exception("request-log tick %r failed", tick)

    def flush(self) -> int:
        """Write everything queued so far, then what waits only in the spool; returns the rows written."""

        total = 0
        with self._flush_lock, checked_connections():
            if self.spool is not None:
                self.spool.rotate()
            while True:
                queued: list[tuple[LogRecord, int]] = []
                while len(queued) < BATCH_SIZE:
                    try:
                        queued.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                if not queued:
                    break
                total += self._write_batch([record for record, _ in queued], [segment for _, segment in queued])
            if self.spool is not None:
                total += self._replay(self.spool)
        return total

    def close(self) -> None:
        """Write everything and let go of the spool (the gateway stopping)."""

        self._tick()
        self.flush()
        if self.spool is not None:
            self.spool.close()

    def _write_batch(self, batch: list[LogRecord], segments: list[int]) -> int:
        """Write a batch; what the database could not take now goes back on the queue (and raises)."""

        written, kept = self._write_or_apart(batch)
        if self.spool is not None:
            kept_ids = {id(rec) for rec in kept}
            self.spool.done(seg for rec, seg in zip(batch, segments) if id(rec) not in kept_ids)
        self.written += written
        if kept:
            by_id = {id(rec): seg for rec, seg in zip(batch, segments)}
            for rec in kept:  # keep them: never lose a record
                self._queue.put((rec, by_id[id(rec)]))
            raise RuntimeError(f"the request log could not write {len(kept)} record(s) now; kept for the next batch")
        return written

    def _replay(self, spool: Spool) -> int:
        """Write the records held only in spool segments (spilled ones, a dead process's), each once."""

        total = 0
        for path in spool.spilled():
            total += self._replay_segment(spool, path)
        for paths in spool.orphans():
            for path in paths:
                total += self._replay_segment(spool, path)
        return total

    def _replay_segment(self, spool: Spool, path: Path) -> int:
        total = 0
        records = list(spool.read(path))
        for start in range(0, len(records), BATCH_SIZE):
            chunk = records[start:start + BATCH_SIZE]
            known = _logged({r.request_id for r in chunk})
            written, kept = self._write_or_apart([r for r in chunk if r.request_id not in known])
            total += written
            if kept:  # the segment stays, to be read again (what was written is then known)
                self.written += total
                raise RuntimeError(f"spool segment {path.name}: {len(kept)} record(s) not written now")
        spool.replayed(path)
        if total:
            log.info("request log: %d row(s) written from spool segment %s", total, path.name)
        self.written += total
        return total

    def _write_or_apart(self, batch: list[LogRecord]) -> tuple[int, list[LogRecord]]:
        """(rows written, records to try again later: the database could not take them now)."""

        if not batch:
            return 0, []
        try:
            self._write(batch)
            return len(batch), []
        except Exception:  # noqa: BLE001 - sorted out record by record
            return self._write_apart(batch)

    def _write_apart(self, batch: list[LogRecord]) -> tuple[int, list[LogRecord]]:
        """A batch failed: its records one by one, so that one bad record cannot hold up the rest.

        A record the database refuses for what it holds (a NUL byte PostgreSQL will not
        store, a lone surrogate) is written again with such characters replaced, so each
        request keeps its row; if even that fails it goes to the process log. A record
        that fails because the database cannot be reached (or is locked) is kept.
        """

        written = 0
        kept: list[LogRecord] = []
        for rec in batch:
            for attempt in ("as is", "scrubbed"):
                try:
                    self._write([rec])
                except DATABASE_AWAY:
                    kept.append(rec)
                except Exception:  # noqa: BLE001 - the record itself: scrub it, or give up on it
                    if attempt == "as is":
                        _scrub(rec)
                        continue
                    log.exception("request-log row for %s could not be written: %r", rec.request_id, rec)
                else:
                    written += 1
                break
        return written, kept

    def _write(self, batch: list[LogRecord]) -> None:
        from django.contrib.auth import get_user_model

        from accounts.models import Account, ApiKey, Provider, Team

        # An account, provider or key deleted since the request ran must not fail the
        # whole batch on its foreign key: its rows are kept with the reference cleared.
        referenced = {attr: {getattr(r, attr) for r in batch} for attr in REFERENCES}
        prices = _present(Provider, referenced["provider_id"], "prices")
        accounts = _present(Account, referenced["account_id"] | {a.account_id for r in batch for a in r.attempts})
        live = {
            "account_id": accounts,
            "provider_id": prices,
            "client_key_id": _present(ApiKey, referenced["client_key_id"]),
            "user_id": _present(get_user_model(), referenced["user_id"]),
            "team_id": _present(Team, referenced["team_id"]),
        }
        for attr, ids in live.items():
            if referenced[attr] - ids.keys() - {None}:  # rarely: only then is the batch walked
                for r in batch:
                    if getattr(r, attr) not in ids:
                        setattr(r, attr, None)
        # Cost where the provider's price table knows the model; summed per account for its balance.
        costs = request_costs(batch, _price_tables(prices))
        spent: dict[int, Decimal] = defaultdict(Decimal)
        for r, cost in zip(batch, costs):
            r.cost = cost  # for the sinks (the spend buckets)
            if cost and r.account_id is not None:
                spent[r.account_id] += cost
        per_account: dict[int, list[int]] = defaultdict(lambda: [0] * len(COUNTERS))
        per_key: dict[int, list[int]] = defaultdict(lambda: [0] * len(COUNTERS))
        key_used: dict[int, Any] = {}  # a key's last request in the batch that it was let in for
        for r in batch:
            for use in account_uses(r.account_id, r.status, r.error_class, r.attempts):
                if use.account_id:
                    _add_use(per_account[use.account_id], use, r)
            if r.client_key_id is not None:
                _add(per_key[r.client_key_id], r)
                if r.error_class != ErrorClass.AUTHENTICATION:
                    key_used[r.client_key_id] = max(r.created_at, key_used.get(r.client_key_id, r.created_at))
        with transaction.atomic(), connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                # The writer must never be what others wait on: past this it gives up, keeps
                # its batch and tries again (a TRUNCATE or a long admin transaction then wins
                # instead of a deadlock that could abort the other side).
                cursor.execute("SET LOCAL lock_timeout = '250ms'")
            # Adapted once: the rows and their attempts share it (Django's adaptation is per value).
            adapt = connection.ops.adapt_datetimefield_value  # ``connection`` is a proxy: looked up once
            created = [adapt(r.created_at) for r in batch]
            _insert_rows(cursor, batch, costs, created)
            _insert_attempts(cursor, batch, accounts, created)
            for sink in self.sinks:
                sink(batch)
            _add_counters(cursor, Account, per_account, spent)
            _add_counters(cursor, ApiKey, per_key, {})
            _stamp_last_used(cursor, ApiKey, key_used)
        self._publish({
            "count": len(batch),
            "requests": [{"request_id": r.request_id, "status": r.status, "account_id": r.account_id,
                          "provider_id": r.provider_id, "model": r.model_requested,
                          "client_protocol": r.client_protocol, "stream": r.stream,
                          "latency_ms": r.latency_ms, "input_tokens": r.input_tokens,
                          "output_tokens": r.output_tokens} for r in batch[-50:]],
            "accounts": sorted(per_account),
        })

    def _publish(self, payload: dict[str, Any]) -> None:
        from accounts import events

        if self._loop is not None and threading.current_thread() is self._thread:
            self._loop.run_until_complete(events.apublish("requests.logged", payload))
        else:  # flush() at shutdown, or a test writing a batch in its own thread
            events.publish("requests.logged", payload)


def _clean(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "")


def _scrub(rec: LogRecord) -> None:
    """Replace what a database may refuse to store (lone surrogates, NUL bytes) in a record's text."""

    for name, value in vars(rec).items():
        if isinstance(value, str):
            setattr(rec, name, _clean(value))
    for attempt in rec.attempts:
        attempt.account_label, attempt.error = _clean(attempt.account_label), _clean(attempt.error)


def _present(model: Any, ids: set[int | None], column: str = "") -> dict[int, Any]:
    """Which of these ids still exist, each with ``column``'s raw value (one query, no ORM)."""

    wanted = sorted(i for i in ids if i is not None)
    if not wanted:
        return {}
    q = connection.ops.quote_name
    pk = q(model._meta.pk.column)
    selected = f"{pk}, {q(model._meta.get_field(column).column)}" if column else pk
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {selected} FROM {q(model._meta.db_table)} "
                       f"WHERE {pk} IN ({', '.join(['%s'] * len(wanted))})", wanted)
        return {row[0]: row[1] if column else None for row in cursor.fetchall()}


def _logged(request_ids: set[str]) -> set[str]:
    """Which of these requests already have their row (a replayed spool may hold written ones)."""

    from accounts.models import RequestLog

    return set(RequestLog.objects.filter(request_id__in=request_ids).values_list("request_id", flat=True))


def _price_tables(raw: dict[int, Any]) -> dict[int, Any]:
    from accounts.models import Provider

    field = Provider._meta.get_field("prices")
    # The stubs want the column expression; JSONField reads it only to tell a key transform from a column.
    return {pk: field.from_db_value(value, None, connection) for pk, value in raw.items()}  # type: ignore[arg-type]


# The columns whose value is not the record's attribute as it is; the others go in as they are.
ADAPTED = ("created_at", "surface", "model_requested", "model_sent", "error_class", "finish_reason", "attempts",
           "attempt_count", "cost", "request_body", "response_body")


def _insert_rows(cursor: Any, batch: list[LogRecord], costs: list[Decimal | None], created: list[Any]) -> None:
    """One INSERT of plain tuples: building a RequestLog instance per row is most of bulk_create's cost.
    ``created``: each record's ``created_at`` adapted for the database."""

    from accounts.models import RequestLog

    conn = cursor.db
    by_name = {f.attname: f for f in RequestLog._meta.concrete_fields if not f.primary_key}
    # The record's own attributes first (one C-level getter per row), the adapted ones after them.
    fields = [f for name, f in by_name.items() if name not in ADAPTED] + [by_name[name] for name in ADAPTED]
    q = conn.ops.quote_name
    # JSON goes in as text (orjson's, for the same value Django's json.dumps would store);
    # PostgreSQL's jsonb takes it with a cast.
    jsonb = conn.vendor == "postgresql"
    placeholders = ["%s::jsonb" if jsonb and f.get_internal_type() == "JSONField" else "%s" for f in fields]
    sql = (f"INSERT INTO {q(RequestLog._meta.db_table)} ({', '.join(q(f.column) for f in fields)}) "
           f"VALUES ({', '.join(placeholders)})")
    as_row = operator.itemgetter(*(f.attname for f in fields[:-len(ADAPTED)]))
    seal = atrest.seal  # encrypted at rest, as the model's fields would (this INSERT bypasses them); "" stays ""
    cursor.executemany(sql, [as_row(r.__dict__) + (
        when, r.surface[:100], r.model_requested[:200], r.model_sent[:200], r.error_class[:60], r.finish_reason[:40],
        _attempts_json(r.attempts), len(r.attempts), cost, seal(r.request_body), seal(r.response_body),
    ) for r, cost, when in zip(batch, costs, created)])


def _insert_attempts(cursor: Any, batch: list[LogRecord], accounts: dict[int, Any], created: list[Any]) -> None:
    """Each attempt on an account that still exists as a ``RequestAttempt`` of its request's row (found
    by its request id, just written); a request without a trace, its account's."""

    from accounts.models import RequestAttempt, RequestLog

    q = cursor.db.ops.quote_name
    log_table, table = q(RequestLog._meta.db_table), q(RequestAttempt._meta.db_table)
    rows: list[tuple[int | None, Any, str, int | None, str]] = []
    for r, when in zip(batch, created):
        if not r.attempts:
            if r.account_id in accounts:
                rows.append((r.account_id, when, "", None, r.request_id))
            continue
        for a in r.attempts:
            if a.account_id in accounts:
                rows.append((a.account_id, when, str(a.verdict)[:20], a.status, r.request_id))
    if rows:
        cursor.executemany(f"INSERT INTO {table} (account_id, created_at, verdict, status, request_id) "
                           f"SELECT %s, %s, %s, %s, id FROM {log_table} WHERE request_id = %s", rows)


def _attempts_json(attempts: list[Attempt]) -> str:
    try:
        return orjson.dumps(attempts).decode()
    except orjson.JSONEncodeError:
        # orjson refuses a lone surrogate (an upstream error text can carry one); json escapes it.
        return json.dumps([asdict(a) for a in attempts])


def _add_counters(cursor: Any, model: Any, counts: dict[int, list[int]], spent: dict[int, Decimal]) -> None:
    """Add a batch's counts to each row's running totals, and charge ``spent`` to its balance."""

    q = cursor.db.ops.quote_name
    meta = model._meta
    table = q(meta.db_table)
    sums = ", ".join(f"{c} = {table}.{c} + %s" for c in (q(meta.get_field(name).column) for name in COUNTERS))
    where = f" WHERE {table}.{q(meta.pk.column)} = %s"
    charge = ""
    if spent:
        balance = q(meta.get_field("balance").column)
        # The same arithmetic as F("balance") - spent: on SQLite Django casts both sides to NUMERIC.
        charge = f", {balance} = CAST(({table}.{balance} - CAST(%s AS NUMERIC)) AS NUMERIC)"
    # In id order: two processes' writers then lock rows in the same order, never deadlock.
    for pk, sums_of_pk in sorted(counts.items()):
        if spent.get(pk):
            cursor.execute(f"UPDATE {table} SET {sums}{charge}{where}", [*sums_of_pk, spent[pk], pk])
        else:
            cursor.execute(f"UPDATE {table} SET {sums}{where}", [*sums_of_pk, pk])


def _stamp_last_used(cursor: Any, model: Any, used: dict[int, Any]) -> None:
    """Move each row's ``last_used_at`` on to its latest request of the batch (never back: another
    process's batch may have written a later one). Once a batch, so a key's last use costs no write of its own."""

    q = cursor.db.ops.quote_name
    table, column, pk = q(model._meta.db_table), q("last_used_at"), q(model._meta.pk.column)
    adapt = cursor.db.ops.adapt_datetimefield_value
    for key_id, at in sorted(used.items()):
        stamp = adapt(at)
        cursor.execute(f"UPDATE {table} SET {column} = %s WHERE {pk} = %s AND ({column} IS NULL OR {column} < %s)",
                       [stamp, key_id, stamp])


def _add(acc: list[int], r: LogRecord) -> None:
    acc[0] += 1
    acc[1] += request_failed(r.status, r.error_class)
    _add_tokens(acc, r)


def _add_use(acc: list[int], use: Use, r: LogRecord) -> None:
    """An account's counters: each use a request, each failed use an error, the tokens where it ended."""

    acc[0] += 1
    acc[1] += use.failed
    if use.final:
        _add_tokens(acc, r)


def _add_tokens(acc: list[int], r: LogRecord) -> None:
    acc[2] += r.input_tokens
    acc[3] += r.output_tokens
    acc[4] += r.cached_tokens
    acc[5] += r.reasoning_tokens
    acc[6] += r.cache_write_tokens


def capped(text: str | bytes, limit: int | None, secrets: Iterable[str] | SecretSet = ()) -> str:
    """A body as the log may keep it: nothing when ``limit`` is None (body logging off), else
    size-capped and redacted.

    Bytes are decoded only when kept: with body logging off (the default) a body costs nothing here.
    """

    if limit is None:
        return ""
    if isinstance(text, bytes):
        text = text[: 8 * limit].decode("utf-8", "replace")  # a UTF-8 character is at most 4 bytes
    # Redact before the final cut so a secret straddling the cap is still recognised whole.
    return redact(text[: 2 * limit], secrets, limit=limit)
