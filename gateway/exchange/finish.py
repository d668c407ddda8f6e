"""How a request ends, whichever way it does: the one place that gives its record the status, the
latency and the tokens, sends the row to the log, and gives back what the request held (its
reservations against the key's limits, its account's concurrency slot).

A request ends once: answered (the JSON answer, the end of a stream, a stream whose client left),
refused after it became an exchange (an upstream's error, no account, a limit), cancelled (the
client hung up, 499) or failed inside the gateway (500). A stream ends after ``api_call`` has
returned, so whoever sees the end calls :func:`finish`, and a second call (a failure after the
answer's row was written: compaction's summary that said nothing) changes nothing: one row per
request, its budgets charged once. A request refused before it became an exchange (its key, its
body) holds nothing and gets its row through :func:`refused`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from accounts.outcomes import ErrorClass
from translation import ir

from ..log.record import LogRecord

if TYPE_CHECKING:
    from ..log.writer import LogWriter
    from .exchange import Exchange


def finish(log: LogWriter, ex: Exchange, status: int, error_class: ErrorClass = ErrorClass.NONE,
           usage: ir.Usage | None = None, end: ir.Finish | None = None) -> None:
    """``ex`` has ended with ``status``: its row goes to ``log``, its hold and account slot go back."""

    if ex.finished:
        return
    ex.finished = True
    stamp(ex.record, status, ex.started, error_class, usage, end)
    log.submit(ex.record)
    ex.settle()


def refused(log: LogWriter, record: LogRecord, started: float, status: int, error_class: ErrorClass) -> None:
    """The row of a request refused before it became an exchange: nothing was held, nothing went upstream."""

    stamp(record, status, started, error_class)
    log.submit(record)


def stamp(record: LogRecord, status: int, started: float, error_class: ErrorClass = ErrorClass.NONE,
          usage: ir.Usage | None = None, end: ir.Finish | None = None) -> None:
    record.status = status
    record.latency_ms = int((time.monotonic() - started) * 1000)
    if error_class:
        record.error_class = error_class
    if usage is not None:
        record.input_tokens = usage.input_tokens or 0
        record.output_tokens = usage.output_tokens or 0
        record.cached_tokens = usage.cached_tokens or 0
        record.cache_write_tokens = usage.cache_creation_tokens or 0
        record.cache_write_1h_tokens = usage.cache_creation_1h_tokens or 0
        record.reasoning_tokens = usage.reasoning_tokens or 0
    if end is not None:
        record.finish_reason = end.reason.value
