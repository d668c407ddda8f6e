"""The load generator: its own process, raw asyncio HTTP/1.1 with keep-alive.

``python -m bench.loadgen`` reads one JSON job per line on stdin and answers one
JSON result per line on stdout, so the benchmark pays its start-up once. It
imports neither Django nor an HTTP library: a protocol-level client costs a
few tens of microseconds of CPU per request, which keeps it from being the
bottleneck, and every result carries the generator's own CPU use to prove it.

Jobs (``kind``):
- ``closed_loop``: ``concurrency`` workers, each sending back-to-back requests
  for ``duration`` seconds (at most ``max_requests``), after ``warmup`` seconds
  that are not counted; workers spread over the targets round-robin.
- ``interleaved``: one request at a time, rotating over the targets each round,
  so that a target and its baseline see the same moment of the machine.
- ``streams``: ``per_target`` streams per target, ``rounds`` times, started
  ``stagger`` seconds apart (0: all at once); each stream's time to first data,
  gaps between data reads, terminator in the last event, and stalls (no byte
  for ``stall_timeout`` seconds).

Every loop is bounded in count and time; only loopback addresses are accepted.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

from .http1 import Conn, HttpError, Pool, Reply

LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass
class Target:
    name: str
    host: str
    port: int
    request: bytes
    terminator: bytes | None = None  # streams: marker expected in the last event

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Target:
        if d["host"] not in LOOPBACK:
            raise ValueError(f"loopback only, not {d['host']}")
        term = d.get("terminator")
        return cls(d["name"], d["host"], int(d["port"]), d["request"].encode("latin-1"),
                   term.encode() if term else None)


def percentiles(values: list[float], scale: float = 1000.0) -> dict[str, float]:
    """p50/p90/p99/mean/max of ``values`` (seconds) in milliseconds."""

    if not values:
        return {"n": 0}
    s = sorted(values)

    def pick(q: float) -> float:
        return s[min(len(s) - 1, int(q * len(s)))] * scale

    return {"n": len(s), "p50": round(pick(0.50), 3), "p90": round(pick(0.90), 3),
            "p99": round(pick(0.99), 3), "mean": round(sum(s) / len(s) * scale, 3),
            "max": round(s[-1] * scale, 3)}


class Errors:
    def __init__(self) -> None:
        self.count = 0
        self.samples: dict[str, int] = {}

    def add(self, what: str) -> None:
        self.count += 1
        if len(self.samples) < 10 or what in self.samples:
            self.samples[what] = self.samples.get(what, 0) + 1


def _check(target: Target, reply: Reply) -> str | None:
    """Why this reply is a failure, or None."""

    if reply.status != 200:
        return f"HTTP {reply.status}"
    if target.terminator is not None and target.terminator not in reply.last_event + reply.pending:
        return "no terminator"
    return None


SEND_ERRORS = (OSError, HttpError, asyncio.TimeoutError)


async def _request(pool: Pool, target: Target) -> Reply:
    """One request on a pooled connection; a connection that failed is dropped from the pool."""

    try:
        conn = await pool.get(target.host, target.port)
        return await asyncio.wait_for(conn.request(target.request, target.terminator is not None), timeout=30)
    except SEND_ERRORS:
        pool.drop(target.host, target.port)
        raise


async def closed_loop(job: dict[str, Any]) -> dict[str, Any]:
    targets = [Target.from_json(t) for t in job["targets"]]
    concurrency = int(job["concurrency"])
    duration, warmup = float(job["duration"]), float(job.get("warmup", 0.5))
    max_requests = int(job.get("max_requests", 1_000_000))
    limit = asyncio.Semaphore(64)
    latencies: dict[str, list[float]] = {t.name: [] for t in targets}
    errors = Errors()
    state = {"measuring": False, "sent": 0}
    t_start = time.perf_counter()
    stop_at = t_start + warmup + duration

    async def worker(i: int) -> None:
        pool = Pool(limit)
        k = i
        try:
            while time.perf_counter() < stop_at and state["sent"] < max_requests:
                target = targets[k % len(targets)]
                k += 1
                measuring = state["measuring"]
                if measuring:
                    state["sent"] += 1
                try:
                    reply = await _request(pool, target)
                except SEND_ERRORS as exc:
                    if measuring:
                        errors.add(type(exc).__name__ + (f": {exc}" if isinstance(exc, HttpError) else ""))
                    await asyncio.sleep(0.01)
                    continue
                if not measuring:
                    continue
                why = _check(target, reply)
                if why:
                    errors.add(why)
                else:
                    latencies[target.name].append(time.perf_counter() - reply.sent_at)
        finally:
            pool.close()

    tasks = [asyncio.create_task(worker(i)) for i in range(concurrency)]
    await asyncio.sleep(warmup)
    state["measuring"] = True
    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*tasks)
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    ok = sum(len(v) for v in latencies.values())
    every = [x for v in latencies.values() for x in v]
    return {"kind": "closed_loop", "concurrency": concurrency, "seconds": round(seconds, 3),
            "ok": ok, "errors": errors.count, "error_samples": errors.samples,
            "rps": round(ok / seconds, 1) if seconds else 0.0, "latency_ms": percentiles(every),
            "per_target": {n: {"ok": len(v), "rps": round(len(v) / seconds, 1)} for n, v in latencies.items()},
            "loadgen_cpu_s": round(cpu, 3), "loadgen_cpu_frac": round(cpu / seconds, 3) if seconds else 0.0}


async def interleaved(job: dict[str, Any]) -> dict[str, Any]:
    targets = [Target.from_json(t) for t in job["targets"]]
    rounds, duration = int(job["rounds"]), float(job["duration"])
    warmup_rounds = int(job.get("warmup_rounds", 20))
    pool = Pool(asyncio.Semaphore(4))
    latencies: dict[str, list[float]] = {t.name: [] for t in targets}
    errors = Errors()
    cpu0, t0 = time.process_time(), time.perf_counter()
    deadline = t0 + duration
    done = 0
    try:
        for r in range(warmup_rounds + rounds):
            if time.perf_counter() > deadline:
                break
            order = targets[r % len(targets):] + targets[:r % len(targets)]
            for target in order:
                try:
                    reply = await _request(pool, target)
                except SEND_ERRORS as exc:
                    errors.add(type(exc).__name__)
                    continue
                if r < warmup_rounds:
                    continue
                why = _check(target, reply)
                if why:
                    errors.add(why)
                else:
                    latencies[target.name].append(time.perf_counter() - reply.sent_at)
            if r >= warmup_rounds:
                done += 1
    finally:
        pool.close()
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    return {"kind": "interleaved", "rounds": done, "errors": errors.count, "error_samples": errors.samples,
            "latency_ms": {n: percentiles(v) for n, v in latencies.items()},
            "loadgen_cpu_s": round(cpu, 3), "loadgen_cpu_frac": round(cpu / seconds, 3) if seconds else 0.0}


async def streams(job: dict[str, Any]) -> dict[str, Any]:
    targets = [Target.from_json(t) for t in job["targets"]]
    per_target, rounds = int(job["per_target"]), int(job.get("rounds", 1))
    stall_timeout, deadline_s = float(job.get("stall_timeout", 5.0)), float(job.get("deadline", 60.0))
    limit = asyncio.Semaphore(int(job.get("connect_parallel", 64)))
    stagger = float(job.get("stagger", 0.0))  # seconds between stream starts within a round
    # Connect every stream first, then send every request at once: the measure of how many
    # streams a server holds is then not limited by how fast it accepts connections.
    preconnect = bool(job.get("preconnect", False))
    ttfb: dict[str, list[float]] = {t.name: [] for t in targets}
    gaps: dict[str, list[float]] = {t.name: [] for t in targets}
    durations: dict[str, list[float]] = {t.name: [] for t in targets}
    completed = {t.name: 0 for t in targets}
    stalls = {t.name: 0 for t in targets}
    errors = {t.name: Errors() for t in targets}
    count = {"connected": 0, "peak_connected": 0, "active": 0, "peak_active": 0}
    cpu0, t0 = time.process_time(), time.perf_counter()
    hard_deadline = t0 + deadline_s

    def first_data() -> None:
        count["active"] += 1
        count["peak_active"] = max(count["peak_active"], count["active"])

    async def one(target: Target, delay: float, go: asyncio.Event | None, ready: list[int]) -> None:
        pool = Pool(limit)
        conn: Conn | None = None
        try:
            if delay:
                await asyncio.sleep(delay)
            conn = await pool.get(target.host, target.port)
            count["connected"] += 1
            count["peak_connected"] = max(count["peak_connected"], count["connected"])
            if go is not None:
                ready[0] += 1
                await go.wait()
            conn.on_first_data = first_data
            task = asyncio.ensure_future(conn.request(target.request, True))
            while not task.done():
                await asyncio.wait([task], timeout=0.25)
                now = time.perf_counter()
                reply = conn.reply
                if task.done() or reply is None:
                    break
                if now - reply.last_activity > stall_timeout or now > hard_deadline:
                    reply.stalled = True
                    conn.abort()
                    break
            reply = conn.reply
            assert reply is not None
            if reply.stalled:
                stalls[target.name] += 1
                task.cancel()
                return
            reply = await task
        except (OSError, HttpError) as exc:
            errors[target.name].add(type(exc).__name__ + (f": {exc}" if isinstance(exc, HttpError) else ""))
            return
        finally:
            if conn is not None:
                count["connected"] -= 1
                if conn.reply is not None and conn.reply.first_data_at:
                    count["active"] -= 1
            pool.close()
        why = _check(target, reply)
        if why:
            errors[target.name].add(why)
            return
        completed[target.name] += 1
        if reply.first_data_at:
            ttfb[target.name].append(reply.first_data_at - reply.sent_at)
        times = reply.data_times
        gaps[target.name].extend(b - a for a, b in zip(times, times[1:]))
        durations[target.name].append(time.perf_counter() - reply.sent_at)

    for _ in range(rounds):
        if time.perf_counter() > hard_deadline:
            break
        # Targets alternate in the start order, so a gateway and its baseline start side by side.
        order = [t for _ in range(per_target) for t in targets]
        go = asyncio.Event() if preconnect else None
        ready = [0]
        tasks = [asyncio.create_task(one(t, k * stagger, go, ready)) for k, t in enumerate(order)]
        if go is not None:
            while ready[0] + sum(1 for t in tasks if t.done()) < len(tasks) and time.perf_counter() < hard_deadline:
                await asyncio.sleep(0.05)
            go.set()
        await asyncio.gather(*tasks)
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    return {"kind": "streams", "seconds": round(seconds, 3), "peak_connected": count["peak_connected"],
            "peak_active": count["peak_active"],
            "per_target": {t.name: {"started": per_target * rounds, "completed": completed[t.name],
                                    "stalled": stalls[t.name], "errors": errors[t.name].count,
                                    "error_samples": errors[t.name].samples,
                                    "ttfb_ms": percentiles(ttfb[t.name]), "gap_ms": percentiles(gaps[t.name]),
                                    "duration_ms": percentiles(durations[t.name])} for t in targets},
            "loadgen_cpu_s": round(cpu, 3), "loadgen_cpu_frac": round(cpu / seconds, 3) if seconds else 0.0}


JOBS = {"closed_loop": closed_loop, "interleaved": interleaved, "streams": streams}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            result = asyncio.run(JOBS[job["kind"]](job))
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
            result = {"kind": job.get("kind"), "failed": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
