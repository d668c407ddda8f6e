"""The request log and usage counters, written off the hot path.

Request handlers hand a finished :class:`Exchange` record to :func:`submit`,
which only appends to a queue. A writer thread drains it in batches: one
``bulk_create`` for the log rows, one counter UPDATE per account and client key
in the batch, then a dashboard broadcast. ``flush()`` runs at interpreter exit,
so a clean shutdown loses no buffered row.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

log = logging.getLogger(__name__)

BATCH_SIZE = 500
BATCH_SECONDS = 0.25


@dataclass
class Attempt:
    account_id: int | None
    account_label: str
    status: int | None  # upstream HTTP status; None for network failures
    verdict: str  # ok | return | retry | disable | network | malformed
    latency_ms: int
    error: str = ""  # redacted excerpt
    tier: str = ""


@dataclass
class LogRecord:
    request_id: str
    client_protocol: str
    client_key_id: int | None = None
    client_key_name: str = ""
    upstream_protocol: str = ""
    provider_id: int | None = None
    account_id: int | None = None
    model_requested: str = ""
    model_sent: str = ""
    stream: bool = False
    status: int = 0
    error_class: str = ""
    attempts: list[Attempt] = field(default_factory=list)
    latency_ms: int = 0
    ttfb_ms: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    finish_reason: str = ""
    request_body: str = ""
    response_body: str = ""
    created_at: Any = field(default_factory=timezone.now)


class LogWriter:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[LogRecord] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self.written = 0

    def submit(self, record: LogRecord) -> None:
        self._queue.put(record)
        if self._thread is None:
            self._start()

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="request-log-writer", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(BATCH_SECONDS)
            try:
                self.flush()
            except Exception:  # noqa: BLE001 - the writer must outlive a bad batch; rows were re-queued
                log.exception("request log batch failed; will retry")
                time.sleep(1.0)

    def flush(self) -> int:
        """Write everything queued so far; returns the number of rows written."""

        total = 0
        with self._flush_lock:
            while True:
                batch: list[LogRecord] = []
                while len(batch) < BATCH_SIZE:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                if not batch:
                    return total
                try:
                    self._write(batch)
                except Exception:
                    for rec in batch:  # keep them: never lose a record
                        self._queue.put(rec)
                    close_old_connections()
                    raise
                total += len(batch)
                self.written += len(batch)

    def _write(self, batch: list[LogRecord]) -> None:
        from accounts import events
        from accounts.models import Account, ApiKey, Provider, RequestLog
        from dashboard import rollup
        from django.db.models import F

        # An account, provider or key deleted since the request ran must not fail the
        # whole batch on its foreign key: its rows are kept with the reference cleared.
        live = {
            "account_id": _existing(Account, {r.account_id for r in batch}),
            "provider_id": _existing(Provider, {r.provider_id for r in batch}),
            "client_key_id": _existing(ApiKey, {r.client_key_id for r in batch}),
        }
        for r in batch:
            for attr, ids in live.items():
                if getattr(r, attr) not in ids:
                    setattr(r, attr, None)
        rows = [RequestLog(
            created_at=r.created_at, request_id=r.request_id, client_key_id=r.client_key_id,
            client_key_name=r.client_key_name, client_protocol=r.client_protocol,
            upstream_protocol=r.upstream_protocol, provider_id=r.provider_id, account_id=r.account_id,
            model_requested=r.model_requested[:200], model_sent=r.model_sent[:200], stream=r.stream,
            status=r.status, error_class=r.error_class[:60], attempts=[asdict(a) for a in r.attempts],
            attempt_count=len(r.attempts), latency_ms=r.latency_ms, ttfb_ms=r.ttfb_ms,
            input_tokens=r.input_tokens, output_tokens=r.output_tokens, cached_tokens=r.cached_tokens,
            reasoning_tokens=r.reasoning_tokens, finish_reason=r.finish_reason[:40],
            request_body=r.request_body, response_body=r.response_body,
        ) for r in batch]
        # Cost where the provider's price table knows the model; summed per account for its balance.
        spent: dict[int, Decimal] = defaultdict(Decimal)
        for row, cost in zip(rows, request_costs(batch)):
            row.cost = cost
            if cost and row.account_id is not None:
                spent[row.account_id] += cost
        per_account: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0, 0])
        per_key: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0, 0])
        for r in batch:
            if r.account_id is not None:
                _add(per_account[r.account_id], r)
            if r.client_key_id is not None:
                _add(per_key[r.client_key_id], r)
        with transaction.atomic():
            if connection.vendor == "postgresql":
                # The writer must never be what others wait on: past this it gives up, keeps
                # its batch and tries again (a TRUNCATE or a long admin transaction then wins
                # instead of a deadlock that could abort the other side).
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL lock_timeout = '250ms'")
            RequestLog.objects.bulk_create(rows, batch_size=BATCH_SIZE)
            rollup.add(rows)  # the dashboard's usage buckets, in the same transaction as the rows
            for model, counts in ((Account, per_account), (ApiKey, per_key)):
                # In id order: two processes' writers then lock rows in the same order, never deadlock.
                for pk, (n, errs, inp, out, cached, reasoning) in sorted(counts.items()):
                    balance = {"balance": F("balance") - spent[pk]} if model is Account and spent.get(pk) else {}
                    model.objects.filter(pk=pk).update(
                        requests=F("requests") + n, errors=F("errors") + errs,
                        input_tokens=F("input_tokens") + inp, output_tokens=F("output_tokens") + out,
                        cached_tokens=F("cached_tokens") + cached,
                        reasoning_tokens=F("reasoning_tokens") + reasoning, **balance,
                    )
        events.publish("requests.logged", {
            "count": len(batch),
            "requests": [{"request_id": r.request_id, "status": r.status, "account_id": r.account_id,
                          "provider_id": r.provider_id, "model": r.model_requested,
                          "client_protocol": r.client_protocol, "stream": r.stream,
                          "latency_ms": r.latency_ms, "input_tokens": r.input_tokens,
                          "output_tokens": r.output_tokens} for r in batch[-50:]],
            "accounts": sorted(per_account),
        })


def request_costs(batch: list[LogRecord]) -> list[Decimal | None]:
    """Each record's cost from its provider's price table (one query per batch)."""

    from accounts.models import Provider
    from accounts.prices import cost

    ids = {r.provider_id for r in batch if r.provider_id is not None and 200 <= r.status < 300}
    tables = dict(Provider.objects.filter(pk__in=ids).values_list("pk", "prices")) if ids else {}
    return [cost(tables.get(r.provider_id), r.model_sent, r.input_tokens, r.output_tokens, r.cached_tokens)
            if r.provider_id in tables and 200 <= r.status < 300 else None for r in batch]


def _existing(model: Any, ids: set[int | None]) -> set[int | None]:
    wanted = {i for i in ids if i is not None}
    found: set[int | None] = set(model.objects.filter(pk__in=wanted).values_list("pk", flat=True)) if wanted else set()
    return found


def _add(acc: list[int], r: LogRecord) -> None:
    acc[0] += 1
    acc[1] += 0 if 200 <= r.status < 300 and not r.error_class else 1
    acc[2] += r.input_tokens
    acc[3] += r.output_tokens
    acc[4] += r.cached_tokens
    acc[5] += r.reasoning_tokens


writer = LogWriter()


def submit(record: LogRecord) -> None:
    writer.submit(record)


def capped(text: str, secrets: Iterable[str] = ()) -> str:
    """A body as the log may keep it: nothing unless body logging is on, else size-capped and redacted."""

    if not settings.GATEWAY_LOG_BODIES:
        return ""
    from accounts.pool import redact

    limit = settings.GATEWAY_LOG_BODY_LIMIT
    # Redact before the final cut so a secret straddling the cap is still recognised whole.
    return redact(text[: 2 * limit], secrets, limit=limit)


@atexit.register
def _flush_at_exit() -> None:
    try:
        writer.flush()
    except Exception:  # noqa: BLE001 - at exit there is nobody left to tell but the log
        log.exception("request log could not be flushed at exit")
