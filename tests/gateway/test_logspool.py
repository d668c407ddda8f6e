"""The request log's spool: every record on disk at once, each written to the database exactly once,
whether the process stops cleanly, is killed, or the database is away for a while."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from accounts.models import RequestLog
from gateway.app import log_sinks
from gateway.log.record import LogRecord
from gateway.log.spool import Spool
from gateway.log.writer import LogWriter

pytestmark = pytest.mark.django_db(transaction=True)


def record(tag: str) -> LogRecord:
    return LogRecord(request_id=f"req_{tag}_{uuid.uuid4().hex[:8]}", client_protocol="openai_chat",
                     model_requested="gpt-\ud800" if tag == "surrogate" else "gpt-test", status=200)


def writer(spool: Spool, **kw: Any) -> LogWriter:
    w = LogWriter(sinks=log_sinks(settings), spool=spool, **kw)
    w._start = lambda: None  # type: ignore[method-assign]  # batches only when the test flushes
    return w


def segments(directory: Path, owner: str = "") -> list[str]:
    return sorted(p.name for p in directory.glob(f"{owner}*.jsonl"))


def die(spool: Spool) -> None:
    """What SIGKILL leaves: the files as they are, the lock let go."""

    os.close(spool._fd)
    os.close(spool._lock_fd)


def test_records_are_on_disk_until_written_then_the_segment_goes(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    w = writer(spool)
    recs = [record(f"r{i}") for i in range(3)]
    for r in recs:
        w.submit(r)
    (name,) = segments(tmp_path)
    assert (tmp_path / name).read_bytes().count(b"\n") == 3
    assert w.flush() == 3
    assert segments(tmp_path) == [] or all((tmp_path / n).stat().st_size == 0 for n in segments(tmp_path))
    assert RequestLog.objects.filter(request_id__in=[r.request_id for r in recs]).count() == 3
    w.close()
    assert list(tmp_path.iterdir()) == []  # a clean stop leaves nothing behind


def test_a_killed_process_leaves_its_records_to_the_next_one_which_writes_each_once(tmp_path: Path) -> None:
    first = Spool(tmp_path)
    w1 = writer(first)
    written, pending = [record(f"w{i}") for i in range(2)], [record(f"p{i}") for i in range(3)]
    for r in written:
        w1.submit(r)
    w1.flush()  # these are in the database; their segment is gone
    for r in pending:
        w1.submit(r)
    # Killed mid-line: the last line is cut short.
    with open(first._path(first._segment), "ab") as f:
        f.write(b'{"request_id": "req_cut')
    die(first)

    second = Spool(tmp_path)
    w2 = writer(second)
    assert w2.flush() == 3
    ids = set(RequestLog.objects.values_list("request_id", flat=True))
    assert {r.request_id for r in written + pending} <= ids
    assert RequestLog.objects.count() == 5  # once each; the cut line is not a row
    assert not any(p.name.startswith(first.owner) for p in tmp_path.iterdir())
    w2.close()


def test_a_record_the_dead_process_had_written_is_not_written_again(tmp_path: Path) -> None:
    first = Spool(tmp_path)
    w1 = writer(first)
    r = record("both")
    w1.submit(r)
    # Written to the database, killed before its segment was deleted.
    LogWriter(sinks=log_sinks(settings))._write([r])
    die(first)
    assert writer(Spool(tmp_path)).flush() == 0
    assert RequestLog.objects.filter(request_id=r.request_id).count() == 1


def test_a_live_process_segments_are_never_replayed_by_another(tmp_path: Path) -> None:
    alive = Spool(tmp_path)
    writer(alive).submit(record("alive"))
    assert writer(Spool(tmp_path)).flush() == 0
    assert RequestLog.objects.count() == 0
    assert len(segments(tmp_path, alive.owner)) == 1


def test_past_the_memory_bound_records_wait_on_disk_and_are_read_back(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    w = writer(spool, memory_bound=2)
    recs = [record(f"m{i}") for i in range(7)]
    for r in recs:
        w.submit(r)
    assert w._queue.qsize() == 2  # the database is away: memory holds no more than its bound
    assert w.flush() == 7
    assert RequestLog.objects.filter(request_id__in=[r.request_id for r in recs]).count() == 7
    w.close()
    assert list(tmp_path.iterdir()) == []


def test_a_record_json_cannot_encode_plainly_still_round_trips(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    w = writer(spool)
    r = record("surrogate")
    w.submit(r)
    die(spool)
    assert writer(Spool(tmp_path)).flush() == 1
    assert RequestLog.objects.get(request_id=r.request_id).model_requested == "gpt-?"


def test_a_priced_record_keeps_its_exact_cost_through_the_spool_line() -> None:
    from decimal import Decimal

    from gateway.log.record import from_line, to_line

    rec = LogRecord(request_id="req_priced", client_protocol="openai_chat", status=200, cost=Decimal("0.00000123"))
    assert from_line(to_line(rec)).cost == Decimal("0.00000123")
    assert from_line(to_line(LogRecord(request_id="req_free", client_protocol="openai_chat"))).cost is None
