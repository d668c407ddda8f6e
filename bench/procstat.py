"""What a process costs, read from /proc: resident memory and CPU time (Linux)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def rss_kb(pid: int) -> int:
    """VmRSS of ``pid`` in KiB (0 when it is gone)."""

    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds ``pid`` has used so far (utime and stime of /proc/<pid>/stat)."""

    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2:].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def command_cpu_seconds(command: str) -> float:
    """CPU seconds used so far by every live process named ``command`` (e.g. PostgreSQL's backends)."""

    total = 0.0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as f:
                    if f.read().strip() != command:
                        continue
            except OSError:
                continue
            total += cpu_seconds(int(entry))
    return total


def loadavg() -> list[float]:
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return []


class CpuWatch:
    """CPU used by named processes between ``start()`` and ``stop()``, as a fraction of one core."""

    def __init__(self, pids: dict[str, int | str]) -> None:  # a str names a command: all its processes
        self.pids = pids
        self._t0 = 0.0
        self._cpu0: dict[str, float] = {}
        self.seconds = 0.0
        self.used: dict[str, float] = {}

    def start(self) -> CpuWatch:
        self._t0 = time.perf_counter()
        self._cpu0 = {name: _used(pid) for name, pid in self.pids.items()}
        return self

    def stop(self) -> CpuWatch:
        self.seconds = time.perf_counter() - self._t0
        self.used = {name: _used(pid) - self._cpu0[name] for name, pid in self.pids.items()}
        return self

    def fractions(self) -> dict[str, float]:
        return {name: round(used / self.seconds, 2) if self.seconds else 0.0 for name, used in self.used.items()}


def _used(pid: int | str) -> float:
    return command_cpu_seconds(pid) if isinstance(pid, str) else cpu_seconds(pid)


@contextmanager
def peak_rss(pid: int, every: float = 0.05) -> Iterator[dict[str, int]]:
    """Samples VmRSS of ``pid`` in a thread while the block runs; yields {"peak_kb": ...}."""

    out = {"peak_kb": rss_kb(pid), "samples": 0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            out["peak_kb"] = max(out["peak_kb"], rss_kb(pid))
            out["samples"] += 1
            stop.wait(every)

    thread = threading.Thread(target=sample, name="rss-sampler", daemon=True)
    thread.start()
    try:
        yield out
    finally:
        stop.set()
        thread.join(2)
