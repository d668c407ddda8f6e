"""Where the gateway's time goes: py-spy on the gateway process under load.

py-spy samples the running process from outside (no code change, ``--nonblocking``
so the process is never paused) while the load generator keeps it busy. The
collapsed stacks are written to ``artifacts/bench-profile.txt``; the summary is
the frames with the most *self* time (the leaf of a sample: where the CPU
actually was), the same summed by package, and the project's own functions by
inclusive time. Only the thread holding the GIL is sampled (``--gil``): the
gateway is one Python process, so that is where its core goes; threads waiting
on a queue or a lock are not counted. py-spy is a developer tool, not
a dependency: ``.venv/bin/pip install py-spy``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Protocol

from .procs import ROOT

class Stack(Protocol):
    """What a profile needs of the bench's running stack (``bench.gateway.Stack``)."""

    gateway: Any  # the gateway's process (its pid)
    loadgen: Any  # the load generator (run())

OUT = ROOT / "artifacts" / "bench-profile.txt"  # bench-profile-<kind>.txt beside it
TOP = 15
_LINE = re.compile(r":\d+\)$")


def py_spy() -> str | None:
    local = Path(sys.executable).parent / "py-spy"
    return str(local) if local.exists() else shutil.which("py-spy")


def short_frame(frame: str) -> str:
    """``func (/long/path/site-packages/pkg/mod.py:12)`` → ``func (pkg/mod.py)``."""

    frame = _LINE.sub(")", frame)
    for marker in ("site-packages/", str(ROOT) + "/", "/lib/python3"):
        head, _, tail = frame.partition("(")
        if marker in tail:  # (py-spy names a module being imported by its path, in the head)
            path = tail.split(marker, 1)[1]
            if marker == "/lib/python3":
                path = "stdlib:" + path.split("/", 1)[1]
            return f"{head}({path}"
    return frame


PROJECT = ("gateway/", "accounts/", "translation/", "dashboard/")


def package(frame: str) -> str:
    """The component a short frame belongs to: ``django``, ``asyncio``, ``gateway``, …"""

    path = frame.rpartition("(")[2].rstrip(")")
    path = path.removeprefix("stdlib:")
    first = path.split("/", 1)[0]
    return first.removesuffix(".py") if first else path


# Where the request log's work runs (issue 21: under 5 % of a request's CPU): the writer's thread,
# and what a request hands it on its own path (the metrics' note, the spool's line, the queue).
LOG_WORK = {"request-log writer thread": "LogWriter._run (", "request-log submit, on the request path": "LogWriter.submit ("}


def summarise(collapsed: str, top: int = TOP) -> dict[str, Any]:
    log_work: Counter[str] = Counter()
    self_time: Counter[str] = Counter()
    by_package: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack or not count_s.isdigit():
            continue
        count = int(count_s)
        frames = [short_frame(f) for f in stack.split(";") if f]
        if not frames:
            continue
        total += count
        self_time[frames[-1]] += count
        by_package[package(frames[-1])] += count
        for frame in set(frames):
            if frame.partition("(")[2].startswith(PROJECT):
                inclusive[frame] += count
        for what, marker in LOG_WORK.items():
            if any(f.startswith(marker) for f in frames):
                log_work[what] += count
                break

    def table(counter: Counter[str]) -> list[dict[str, Any]]:
        return [{"frame": f, "samples": n, "pct": round(100 * n / total, 1)} for f, n in counter.most_common(top)]

    return {"samples": total, "top_self": table(self_time), "self_by_package": table(by_package),
            "top_project_inclusive": table(inclusive),
            "request_log_pct": {what: round(100 * log_work[what] / total, 1) if total else None for what in LOG_WORK}}


def profile_under_load(stack: Stack, target: dict[str, Any], seconds: float, kind: str = "non-streaming") -> dict[str, Any]:
    exe = py_spy()
    if exe is None:
        return {"skipped": "py-spy is not installed (.venv/bin/pip install py-spy)"}
    OUT.parent.mkdir(exist_ok=True)
    out = OUT.with_name(f"bench-profile-{kind}.txt")
    spy = subprocess.Popen([exe, "record", "--pid", str(stack.gateway.pid), "--duration", str(int(seconds)),
                            "--rate", "250", "--format", "raw", "--nonblocking", "--gil", "--output", str(out)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        load = stack.loadgen.run({"kind": "closed_loop", "targets": [target], "concurrency": 16,
                                  "duration": seconds + 1.0, "warmup": 0.2})
        _, err = spy.communicate(timeout=seconds + 30)
    finally:
        if spy.poll() is None:
            spy.kill()
            spy.wait()
    if spy.returncode != 0 or not out.exists():
        return {"skipped": f"py-spy failed: {err.decode(errors='replace')[-500:]}"}
    summary = summarise(out.read_text())
    summary.update({"route": target["name"], "concurrency": 16, "rps_while_sampled": load["rps"],
                    "kind": kind, "collapsed_stacks": str(out.relative_to(ROOT))})
    print_summary(summary)
    return summary


def print_summary(summary: dict[str, Any]) -> None:
    print(f"\n== Profile of the gateway process ({summary['route']}, c=16 {summary.get('kind', 'non-streaming')}, "
          f"{summary['samples']} samples, {summary['rps_while_sampled']} req/s while sampled) ==")
    for title, key in (("frames by self time", "top_self"), ("packages by self time", "self_by_package"),
                       ("project functions by inclusive time", "top_project_inclusive")):
        print(f"-- top {TOP} {title}")
        for row in summary[key]:
            print(f"{row['pct']:>6.1f}%  {row['frame']}")
    shares = summary.get("request_log_pct", {})
    if shares:
        print(f"-- the request log: {sum(v or 0 for v in shares.values()):.1f}% of the samples ("
              + ", ".join(f"{what} {pct}%" for what, pct in shares.items()) + ")")
    print(f"(collapsed stacks: {summary['collapsed_stacks']})")
