"""The request log's spool: each finished request's record on local disk the moment it is submitted.

The writer thread (``gateway.log.writer``) writes the log in batches once a second,
because each batch has a fixed cost; a process killed between two batches
(SIGKILL, the OOM killer, a crash) lost up to a second of rows, and while the
database was away the rows waited in memory without a bound. So submitting a
record also appends it, as one JSON line, to this process's current spool
segment: one ``write(2)`` into the page cache, which outlives the process (not
the machine: there is no fsync). The writer starts a new segment at every batch
and deletes a segment once every record in it is in the database.

While the database is away the writer's memory queue holds at most a bounded
number of records; the others are then only here ("spilled"), and their
segments are read back once the database answers. The segments of a process
that died are replayed by the next gateway process started on the same spool
directory and database. A replayed record already in the log (found by its
request id) is skipped, so a record is written once however the process ended.

Each process owns a lock file (``<owner>.lock``, held with ``flock`` for its
lifetime) and names its segments ``<owner>.<n>.jsonl``: a segment whose owner's
lock can be taken belongs to a dead process. A spool directory serves one
database (``for_database`` puts each database's spool in a directory of its own).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import threading
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .record import LogRecord, from_line, to_line

log = logging.getLogger(__name__)


def for_database(root: Path, settings_dict: dict[str, Any]) -> Path:
    """The spool directory of one database, under ``root``."""

    identity = "|".join(str(settings_dict.get(k, "")) for k in ("ENGINE", "HOST", "PORT", "NAME"))
    return root / hashlib.sha256(identity.encode()).hexdigest()[:16]


class Spool:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.owner = uuid.uuid4().hex[:12]
        self._lock_fd = os.open(directory / f"{self.owner}.lock", os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._lock = threading.Lock()  # appends (request path) and rotation (writer thread)
        self._segment = 0
        self._fd = self._open(0)
        self._outstanding: Counter[int] = Counter()  # records of each segment not yet in the database
        self._spilled: set[int] = set()  # segments with records held only here
        self.broken = False
        self._closed = False

    def _path(self, segment: int, owner: str | None = None) -> Path:
        return self.directory / f"{owner or self.owner}.{segment:09d}.jsonl"

    def _open(self, segment: int) -> int:
        return os.open(self._path(segment), os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)

    # ----------------------------------------------------------------- request path

    def append(self, record: LogRecord) -> int:
        """Put ``record`` on disk; its segment, or -1 when it could not be (the request goes on)."""

        line = to_line(record)
        with self._lock:
            if self.broken:
                return -1
            try:
                os.write(self._fd, line)
            except OSError:
                self.broken = True  # a full disk: log in memory only from now on, and say so once
                log.exception("request-log spool failed; records are held in memory only")
                return -1
            self._outstanding[self._segment] += 1
            return self._segment

    def spill(self, segment: int) -> None:
        """A record of ``segment`` is held only here: read the segment back once it can be written."""

        with self._lock:
            self._spilled.add(segment)

    # ----------------------------------------------------------------- writer thread

    def rotate(self) -> None:
        """Records from now on go to a new segment (one per batch, so segments are deleted soon)."""

        with self._lock:
            if self.broken or self._outstanding[self._segment] == 0:
                return
            os.close(self._fd)
            self._segment += 1
            self._fd = self._open(self._segment)
        self._collect()

    def done(self, segments: Iterable[int]) -> None:
        """These records (one segment number each) are in the database."""

        with self._lock:
            for segment in segments:
                if segment >= 0:
                    self._outstanding[segment] -= 1
        self._collect()

    def _collect(self) -> None:
        with self._lock:
            finished = [s for s, n in self._outstanding.items()
                        if n <= 0 and s != self._segment and s not in self._spilled]
            for segment in finished:
                del self._outstanding[segment]
        for segment in finished:
            self._path(segment).unlink(missing_ok=True)

    def spilled(self) -> list[Path]:
        """This process's closed segments with records held only here."""

        with self._lock:
            return [self._path(s) for s in sorted(self._spilled) if s != self._segment]

    def orphans(self) -> Iterator[list[Path]]:
        """The segments of each dead process, one process at a time, its lock held meanwhile (so
        that two processes starting at once never replay the same segments)."""

        for lock in sorted(self.directory.glob("*.lock")):
            owner = lock.stem
            if owner == self.owner:
                continue
            fd = _claim(lock)
            if fd is None:
                continue  # alive, or being replayed by another process
            try:
                yield sorted(self.directory.glob(f"{owner}.*.jsonl"))
                if not any(self.directory.glob(f"{owner}.*.jsonl")):
                    lock.unlink(missing_ok=True)
            finally:
                os.close(fd)

    def read(self, path: Path) -> Iterator[LogRecord]:
        with open(path, "rb") as f:
            for number, line in enumerate(f, 1):
                if not line.endswith(b"\n"):
                    break  # the last line of a process killed while writing it
                try:
                    yield from_line(line)
                except (ValueError, TypeError, KeyError):
                    log.error("request-log spool %s line %d unreadable; skipped", path.name, number)

    def replayed(self, path: Path) -> None:
        """Every record of ``path`` is in the database."""

        owner, segment = path.name.split(".")[:2]
        path.unlink(missing_ok=True)
        if owner == self.owner:
            with self._lock:
                self._spilled.discard(int(segment))
                self._outstanding.pop(int(segment), None)

    def close(self) -> None:
        """Every record is in the database (the gateway stopped cleanly): nothing of this process is left."""

        with self._lock:
            if self._closed:
                return
            self._closed = True
            os.close(self._fd)
            self.broken = True
        if not any(n > 0 for n in self._outstanding.values()) and not self._spilled:
            for path in self.directory.glob(f"{self.owner}.*.jsonl"):
                path.unlink(missing_ok=True)
            (self.directory / f"{self.owner}.lock").unlink(missing_ok=True)
        os.close(self._lock_fd)


def _claim(lock: Path) -> int | None:
    """The lock of a dead owner, now held by this process (closing the descriptor lets go of it);
    None when its owner is alive or another process holds it."""

    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd
