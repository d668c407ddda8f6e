"""The full gateway against the scripted upstream called directly and against the bare relay.

One run starts the scripted upstream, the gateway (``gateway.serve``, its own scratch
SQLite database, the bench config loaded with ``loadconfig``), the bare relay
and the load generator, then measures — every figure next to its baseline from
the same run:

- ``latency``: added latency at concurrency 1 (p50/p99), gateway and direct
  calls interleaved request by request;
- ``throughput``: non-streaming requests/s at concurrency 1, 16 and 64;
- ``streams``: 20-chunk streams/s at concurrency 16;
- ``paced``: added time to first byte and inter-chunk gap p99 on 64 deltas × 20 ms,
  streams started 30 ms apart and overlapping their baselines;
- ``hold``: 1,000 concurrent paced streams held by one fresh gateway process
  (64 × 20 ms; full runs also 64 × 250 ms, long enough for all to stream at
  once): stalls, errors, resident memory per stream, CPU-seconds per 1,000;
- ``multiproc``: two gateway processes on PostgreSQL against one, c=64;
- ``servers``: bare relay and gateway on our server (uvicorn) and on Daphne, c=1 and c=16;
- ``passthrough``: the same-protocol routes (chat→chat, anthropic→anthropic,
  responses→responses with ``store: false`` and stored), streaming and not, at c=16 and
  c=64 (quick runs: c=16), against the bare relay on the gateway's own server (issue 21's
  targets: same protocol ≥ 0.9 of the relay, stored ≥ 0.8, translated ≥ 0.6; medians of
  interleaved slices), and beside each the same client through a translated route;
- ``profile`` (only when asked): py-spy on the gateway under c=16 non-streaming.
"""

from __future__ import annotations

import gc
import os
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import profile as profiler
from .procs import DAPHNE_ARGS, Child, LoadGen, Processes, free_port, gateway_env
from .procstat import CpuWatch, loadavg, peak_rss, rss_kb
from .procs import HOST
from .targets import (CLIENT_KEY, PACED_MODEL, PATHS, PROVIDERS, ROUTES, SHORT, SINGLE_ACCOUNT_PROVIDER,
                      STREAM_MODEL, TEXT_MODEL, UPSTREAM_KEY, UPSTREAMS, Route, bench_config, body, direct_target,
                      gateway_target, raw_request, relay_target)

PG_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"
PG_BENCH_DB = "bench_gateway"
SECTIONS = ["latency", "throughput", "streams", "paced", "hold", "multiproc", "servers", "passthrough", "spool",
            "conversation"]
EXTRA_SECTIONS = ["profile", "profile_stream", "profile_passthrough", "profile_stored", "profile_unstored"]


@dataclass(frozen=True)
class Plan:
    """How long each measurement runs; every loop is bounded by these."""

    quick: bool
    latency_rounds: int
    latency_max_s: float
    duration: float  # each closed-loop measurement, in all
    warmup: float  # before each slice, not counted
    slices: int = 3  # a target's duration split in turns with the other targets
    concurrencies: tuple[int, ...] = (1, 16, 64)
    stream_concurrency: int = 16
    paced_per_target: int = 8
    paced_rounds: int = 2
    paced_stagger: float = 0.03
    hold_streams: int = 1000
    hold_deadline: float = 120.0
    stall_timeout: float = 30.0  # no byte for this long: a stall (queueing for a start is not one)
    profile_seconds: float = 10.0

    @classmethod
    def for_mode(cls, quick: bool) -> Plan:
        if quick:
            return cls(True, latency_rounds=150, latency_max_s=15, duration=0.8, warmup=0.25, slices=1,
                       paced_per_target=5, paced_rounds=1, hold_deadline=90.0, profile_seconds=5.0)
        # BENCH_HOLD_STREAMS: the lean path's target is for 10,000 streams at once, which needs ~25,000
        # open files across the gateway, the upstream and the load generator (`ulimit -n`).
        return cls(False, latency_rounds=500, latency_max_s=45, duration=3.0, warmup=0.3,
                   hold_streams=int(os.environ.get("BENCH_HOLD_STREAMS", "1000")))


@dataclass
class Stack:
    procs: Processes
    workdir: Path
    mock: Child
    gateway: Child
    relay: Child
    loadgen: LoadGen
    sqlite_url: str

    def pids(self) -> dict[str, int]:
        return {"gateway": self.gateway.pid, "upstream": self.mock.pid, "bare_relay": self.relay.pid,
                "loadgen": self.loadgen.pid}


def setup(procs: Processes, workdir: Path) -> Stack:
    mock = procs.mock()
    db_url = f"sqlite:///{workdir / 'gateway.sqlite3'}"
    prepare_database(procs, workdir, db_url, mock.url)
    gateway = procs.gateway("gateway", gateway_env(db_url))
    relay = procs.bare_relay(mock.url)
    return Stack(procs, workdir, mock, gateway, relay, procs.loadgen(), db_url)


def prepare_database(procs: Processes, workdir: Path, db_url: str, upstream_url: str) -> None:
    config = workdir / "bench.toml"
    config.write_text(bench_config(upstream_url))
    env = gateway_env(db_url)
    procs.manage(env, "migrate", "--noinput")
    procs.manage(env, "loadconfig", str(config))


# ----------------------------------------------------------------- helpers


def closed_loop(stack: Stack, targets: list[dict[str, Any]], concurrency: int, plan: Plan,
                duration: float | None = None, pids: dict[str, int | str] | None = None) -> dict[str, Any]:
    watch = CpuWatch(pids or stack.pids())
    job = {"kind": "closed_loop", "targets": targets, "concurrency": concurrency,
           "duration": duration or plan.duration, "warmup": plan.warmup}
    # The load generator warms up first; CPU is watched over the whole job and scaled to it.
    watch.start()
    result = stack.loadgen.run(job)
    watch.stop()
    result["cpu_frac"] = watch.fractions()
    result["cpu_s"] = {k: round(v, 3) for k, v in watch.used.items()}
    # The watch spans warm-up too; the measured rate over the same span is the request count.
    result["watched_requests"] = round(result["rps"] * watch.seconds)
    return result


def _per_1000(cpu_s: float, requests: int) -> float | None:
    return round(cpu_s / requests * 1000, 3) if requests else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def _diff(a: float | None, b: float | None) -> float | None:
    return round(a - b, 3) if a is not None and b is not None else None


# ----------------------------------------------------------------- measurements


def latency(stack: Stack, plan: Plan) -> dict[str, Any]:
    """Concurrency 1, one request at a time rotating over gateway routes and their baselines."""

    port_gw, port_up, port_relay = stack.gateway.port, stack.mock.port, stack.relay.port
    assert port_gw and port_up and port_relay
    targets = ([direct_target(u, port_up, TEXT_MODEL, False) for u in UPSTREAMS]
               + [relay_target(u, port_relay, TEXT_MODEL, False) for u in UPSTREAMS]
               + [gateway_target(r, port_gw, TEXT_MODEL, False) for r in ROUTES])
    res = stack.loadgen.run({"kind": "interleaved", "targets": targets, "rounds": plan.latency_rounds,
                             "duration": plan.latency_max_s, "warmup_rounds": 30})
    lat = res["latency_ms"]
    out: dict[str, Any] = {"rounds": res["rounds"], "errors": res["errors"], "error_samples": res["error_samples"],
                           "loadgen_cpu_frac": res["loadgen_cpu_frac"], "raw_ms": lat, "routes": {},
                           "bare_relay": {}}
    for u in UPSTREAMS:
        d, b = lat[f"direct {SHORT[u]}"], lat[f"bare relay {SHORT[u]}"]
        out["bare_relay"][SHORT[u]] = {"added_p50_ms": _diff(b.get("p50"), d.get("p50")),
                                       "added_p99_ms": _diff(b.get("p99"), d.get("p99"))}
    for r in ROUTES:
        g, d = lat[f"gateway {r.name}"], lat[f"direct {SHORT[r.upstream]}"]
        out["routes"][r.name] = {
            "gateway_p50_ms": g.get("p50"), "gateway_p99_ms": g.get("p99"),
            "direct_p50_ms": d.get("p50"), "direct_p99_ms": d.get("p99"),
            "added_p50_ms": _diff(g.get("p50"), d.get("p50")), "added_p99_ms": _diff(g.get("p99"), d.get("p99")),
            "ratio_p50": _ratio(g.get("p50"), d.get("p50")), "ratio_p99": _ratio(g.get("p99"), d.get("p99")),
        }
    return out


def _rate_runs(stack: Stack, plan: Plan, model: str, stream: bool, concurrency: int) -> dict[str, Any]:
    """Requests (or streams) per second for each baseline and route at one concurrency.

    Each target runs ``plan.slices`` times, the targets taking turns (in
    alternating order), so that a change in what else the machine is doing
    weighs on a route and on its baselines alike.
    """

    port_gw, port_up, port_relay = stack.gateway.port, stack.mock.port, stack.relay.port
    assert port_gw and port_up and port_relay
    plans: list[tuple[str, dict[str, Any], str]] = []
    for u in UPSTREAMS:
        plans.append((f"direct {SHORT[u]}", direct_target(u, port_up, model, stream), "upstream"))
        plans.append((f"bare relay {SHORT[u]}", relay_target(u, port_relay, model, stream), "bare_relay"))
    for r in ROUTES:
        plans.append((f"gateway {r.name}", gateway_target(r, port_gw, model, stream), "gateway"))
    slices: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in plans}
    for k in range(plan.slices):
        for name, tgt, server in (plans if k % 2 == 0 else plans[::-1]):
            res = closed_loop(stack, [tgt], concurrency, plan, duration=plan.duration / plan.slices)
            res["server"] = server
            slices[name].append(res)
    runs = {name: _combine(parts) for name, parts in slices.items()}
    ratios = {}
    for r in ROUTES:
        g = runs[f"gateway {r.name}"]
        bare, direct = runs[f"bare relay {SHORT[r.upstream]}"], runs[f"direct {SHORT[r.upstream]}"]
        ratios[r.name] = {"gateway_rps": g["rps"], "of_bare_relay": _ratio(g["rps"], bare["rps"]),
                          "of_direct": _ratio(g["rps"], direct["rps"]),
                          "server_cpu_ms_per_request": g["server_cpu_ms_per_request"],
                          "bare_relay_cpu_ms_per_request": bare["server_cpu_ms_per_request"]}
    return {"runs": runs, "routes": ratios, "slices": plan.slices}


def _combine(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One target's slices as one figure: requests over measured seconds, CPU over requests."""

    ok = sum(p["ok"] for p in parts)
    seconds = sum(p["seconds"] for p in parts)
    server = parts[0]["server"]
    server_cpu = sum(p["cpu_s"][server] for p in parts)
    watched = sum(p["watched_requests"] for p in parts)
    samples: dict[str, int] = {}
    for p in parts:
        for what, n in p["error_samples"].items():
            samples[what] = samples.get(what, 0) + n
    return {"rps": round(ok / seconds, 1) if seconds else 0.0, "ok": ok, "errors": sum(p["errors"] for p in parts),
            "error_samples": samples, "seconds": round(seconds, 3),
            "rps_by_slice": [p["rps"] for p in parts],
            "latency_ms_by_slice": [p["latency_ms"] for p in parts],
            "cpu_frac": {k: round(sum(p["cpu_frac"][k] for p in parts) / len(parts), 2) for k in parts[0]["cpu_frac"]},
            "server_cpu_ms_per_request": round(server_cpu / watched * 1000, 3) if watched else None,
            "loadgen_cpu_frac": max(p["loadgen_cpu_frac"] for p in parts)}


def throughput(stack: Stack, plan: Plan) -> dict[str, Any]:
    return {f"c={c}": _rate_runs(stack, plan, TEXT_MODEL, False, c) for c in plan.concurrencies}


def streams(stack: Stack, plan: Plan) -> dict[str, Any]:
    out = _rate_runs(stack, plan, STREAM_MODEL, True, plan.stream_concurrency)
    out["concurrency"] = plan.stream_concurrency
    out["chunks_per_stream"] = 20
    return out


def paced(stack: Stack, plan: Plan) -> dict[str, Any]:
    """Paced streams for every route and baseline, overlapping, so they share the same moments.

    Starts are staggered (``paced_stagger``): a burst of simultaneous starts would
    measure queueing behind the other starts, not what one stream pays.
    """

    port_gw, port_up, port_relay = stack.gateway.port, stack.mock.port, stack.relay.port
    assert port_gw and port_up and port_relay
    targets = ([direct_target(u, port_up, PACED_MODEL, True) for u in UPSTREAMS]
               + [relay_target(u, port_relay, PACED_MODEL, True) for u in UPSTREAMS]
               + [gateway_target(r, port_gw, PACED_MODEL, True) for r in ROUTES])
    watch = CpuWatch(stack.pids()).start()
    res = stack.loadgen.run({"kind": "streams", "targets": targets, "per_target": plan.paced_per_target,
                             "rounds": plan.paced_rounds, "stall_timeout": plan.stall_timeout,
                             "stagger": plan.paced_stagger, "deadline": 60.0})
    watch.stop()
    per = res["per_target"]
    out: dict[str, Any] = {"per_target": per, "cpu_frac": watch.fractions(),
                           "loadgen_cpu_frac": res["loadgen_cpu_frac"], "routes": {}, "bare_relay": {},
                           "concurrent_streams": plan.paced_per_target * len(targets)}
    for u in UPSTREAMS:
        d, b = per[f"direct {SHORT[u]}"], per[f"bare relay {SHORT[u]}"]
        out["bare_relay"][SHORT[u]] = {
            "added_ttfb_p50_ms": _diff(b["ttfb_ms"].get("p50"), d["ttfb_ms"].get("p50")),
            "added_gap_p99_ms": _diff(b["gap_ms"].get("p99"), d["gap_ms"].get("p99"))}
    for r in ROUTES:
        g, d = per[f"gateway {r.name}"], per[f"direct {SHORT[r.upstream]}"]
        out["routes"][r.name] = {
            "ttfb_p50_ms": g["ttfb_ms"].get("p50"), "direct_ttfb_p50_ms": d["ttfb_ms"].get("p50"),
            "added_ttfb_p50_ms": _diff(g["ttfb_ms"].get("p50"), d["ttfb_ms"].get("p50")),
            "added_ttfb_p99_ms": _diff(g["ttfb_ms"].get("p99"), d["ttfb_ms"].get("p99")),
            "gap_p99_ms": g["gap_ms"].get("p99"), "direct_gap_p99_ms": d["gap_ms"].get("p99"),
            "added_gap_p99_ms": _diff(g["gap_ms"].get("p99"), d["gap_ms"].get("p99")),
            "completed": g["completed"], "stalled": g["stalled"], "errors": g["errors"],
        }
    return out


HOLD_ROUTE = Route("anthropic", "openai_chat")  # Claude Code-style clients on an OpenAI-compatible pool
HOLD_LONG_MODEL = "mock-slow-64x250"  # 16 s streams: long enough for all of them to be open at once


def hold(stack: Stack, plan: Plan) -> dict[str, Any]:
    """N concurrent paced streams held by one fresh gateway process (per variant).

    ``paced``: the 64 × 20 ms stream, every request sent at once on connections
    opened beforehand; ``long`` (full runs): 64 × 250 ms, so that all N are
    open together even when the gateway is slow to start them.
    """

    out: dict[str, Any] = {"route": HOLD_ROUTE.name, "streams": plan.hold_streams}
    variants = [("paced", PACED_MODEL)] + ([] if plan.quick else [("long", HOLD_LONG_MODEL)])
    for name, model in variants:
        out[name] = _hold_once(stack, plan, model)
    return out


def _hold_once(stack: Stack, plan: Plan, model: str) -> dict[str, Any]:
    gw = stack.procs.gateway("gateway-hold", gateway_env(stack.sqlite_url))
    try:
        assert gw.port
        # Warm it up (imports, caches, connection pool), then take the resting size.
        warm = gateway_target(HOLD_ROUTE, gw.port, STREAM_MODEL, True)
        stack.loadgen.run({"kind": "closed_loop", "targets": [warm], "concurrency": 16, "duration": 1.0,
                           "warmup": 0.2, "max_requests": 400})
        gc.collect()
        time.sleep(1.0)  # let the request-log writer drain
        before = rss_kb(gw.pid)
        tgt = gateway_target(HOLD_ROUTE, gw.port, model, True)
        watch = CpuWatch({"gateway": gw.pid, "upstream": stack.mock.pid, "loadgen": stack.loadgen.pid}).start()
        with peak_rss(gw.pid) as rss:
            res = stack.loadgen.run({"kind": "streams", "targets": [tgt], "per_target": plan.hold_streams,
                                     "rounds": 1, "stall_timeout": plan.stall_timeout, "preconnect": True,
                                     "deadline": plan.hold_deadline, "connect_parallel": 64})
        watch.stop()
        after = rss_kb(gw.pid)
    finally:
        stack.procs.stop(gw)
    per = res["per_target"][tgt["name"]]
    n, in_flight = plan.hold_streams, res["peak_connected"]
    grown = rss["peak_kb"] - before
    return {
        "model": model, "streams": n, "peak_connected": in_flight, "peak_active": res["peak_active"],
        "completed": per["completed"], "stalled": per["stalled"], "errors": per["errors"],
        "error_samples": per["error_samples"], "hold_seconds": res["seconds"],
        "stream_duration_ms": per["duration_ms"], "ttfb_ms": per["ttfb_ms"], "gap_ms": per["gap_ms"],
        "rss_before_kb": before, "rss_peak_kb": rss["peak_kb"], "rss_after_kb": after,
        # Every connected stream had its request in the gateway (sent at once): each holds memory.
        "rss_per_stream_kb": round(grown / in_flight, 1) if in_flight else None,
        "gateway_cpu_s": round(watch.used["gateway"], 3),
        "gateway_cpu_s_per_1000": _per_1000(watch.used["gateway"], per["completed"]),
        "cpu_frac": watch.fractions(), "loadgen_cpu_frac": res["loadgen_cpu_frac"],
    }


def _postgres_reachable() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=1.0):
            return True
    except OSError:
        return False


def _scratch_postgres() -> str:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {PG_BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {PG_BENCH_DB}")
    return PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + PG_BENCH_DB


def multiproc(stack: Stack, plan: Plan) -> dict[str, Any]:
    """c=64 chat→chat on one gateway process on PostgreSQL, then split over two."""

    if not _postgres_reachable():
        return {"skipped": "PostgreSQL is not reachable at 127.0.0.1:5432"}
    try:
        url = _scratch_postgres()
    except Exception as exc:  # noqa: BLE001 - any failure to get a scratch database means skip
        return {"skipped": f"could not create the scratch database {PG_BENCH_DB}: {type(exc).__name__}: {exc}"}
    prepare_database(stack.procs, stack.workdir, url, stack.mock.url)
    route = ROUTES[0]
    gw1 = stack.procs.gateway("gateway-pg-1", gateway_env(url))
    gw2 = stack.procs.gateway("gateway-pg-2", gateway_env(url))
    try:
        assert gw1.port and gw2.port
        t1 = gateway_target(route, gw1.port, TEXT_MODEL, False)
        t2 = gateway_target(route, gw2.port, TEXT_MODEL, False)
        t2["name"] = t2["name"] + " (2)"
        # PostgreSQL's own backends too: on 2 cores, what they and the upstream take bounds the ratio.
        pids: dict[str, int | str] = {"gateway_1": gw1.pid, "gateway_2": gw2.pid, "upstream": stack.mock.pid,
                                      "loadgen": stack.loadgen.pid, "postgres": "postgres"}
        closed_loop(stack, [t1, t2], 16, plan, duration=1.0, pids=pids)  # warm both
        one = closed_loop(stack, [t1], 64, plan, pids=pids)
        two = closed_loop(stack, [t1, t2], 64, plan, pids=pids)
        single = gateway_target(route, gw1.port, TEXT_MODEL, False, provider=SINGLE_ACCOUNT_PROVIDER)
        lone = closed_loop(stack, [single], 64, plan, duration=1.0, pids=pids)
    finally:
        stack.procs.stop(gw2)
        stack.procs.stop(gw1)

    def summary(res: dict[str, Any]) -> dict[str, Any]:
        # Requests per core the gateways used: flat from one process to two means the gateway scales,
        # and what the ratio lacks is cores the machine did not have.
        cores = res["cpu_frac"].get("gateway_1", 0) + res["cpu_frac"].get("gateway_2", 0)
        return {"rps": res["rps"], "ok": res["ok"], "errors": res["errors"], "error_samples": res["error_samples"],
                "latency_ms": res["latency_ms"], "per_target": res["per_target"], "cpu_frac": res["cpu_frac"],
                "loadgen_cpu_frac": res["loadgen_cpu_frac"],
                "rps_per_gateway_core": round(res["rps"] / cores) if cores else None}

    return {"database": f"postgresql/{PG_BENCH_DB}", "route": route.name, "concurrency": 64,
            "one_process": summary(one), "two_processes": summary(two), "ratio": _ratio(two["rps"], one["rps"]),
            "single_account_pool": {"ok": lone["ok"], "errors": lone["errors"],
                                    "error_samples": lone["error_samples"]}}


def profile(stack: Stack, plan: Plan) -> dict[str, Any]:
    port = stack.gateway.port
    assert port
    tgt = gateway_target(ROUTES[0], port, TEXT_MODEL, False)
    return profiler.profile_under_load(stack, tgt, plan.profile_seconds)


def profile_stream(stack: Stack, plan: Plan) -> dict[str, Any]:
    """The same on 20-chunk streams, anthropic→chat (a route that translates every event)."""

    port = stack.gateway.port
    assert port
    tgt = gateway_target(ROUTES[2], port, STREAM_MODEL, True)
    return profiler.profile_under_load(stack, tgt, plan.profile_seconds, "stream")


def profile_passthrough(stack: Stack, plan: Plan) -> dict[str, Any]:
    """The same on 20-chunk streams, anthropic→anthropic (passed through with a tap)."""

    port = stack.gateway.port
    assert port
    tgt = gateway_target(Route("anthropic", "anthropic"), port, STREAM_MODEL, True)
    return profiler.profile_under_load(stack, tgt, plan.profile_seconds, "passthrough")


def profile_stored(stack: Stack, plan: Plan) -> dict[str, Any]:
    """The same on stored Responses JSON, responses→responses (the answer kept for previous_response_id)."""

    port = stack.gateway.port
    assert port
    tgt = gateway_target(Route("responses", "responses"), port, TEXT_MODEL, False)
    return profiler.profile_under_load(stack, tgt, plan.profile_seconds, "stored")


def profile_unstored(stack: Stack, plan: Plan) -> dict[str, Any]:
    """profile_stored's twin with ``store: false``: what storing adds is the difference of the two."""

    port = stack.gateway.port
    assert port
    route = Route("responses", "responses")
    tgt = _unstored(gateway_target(route, port, TEXT_MODEL, False), port, route, TEXT_MODEL, False, False)
    return profiler.profile_under_load(stack, tgt, plan.profile_seconds, "unstored")


def servers(stack: Stack, plan: Plan) -> dict[str, Any]:
    """Our server (uvicorn, ``gateway.serve``) against Daphne, bare relay and gateway, chat→chat: c=1 and c=16.

    The measured case for the server the API runs on (the stack card named Daphne), and
    the gateway's share of a bare relay on its own server, beside the Daphne baseline.
    """

    relay_port, gw_port = free_port(), free_port()
    relay = stack.procs.start("bare-relay-uvicorn", [sys.executable, "-m", "bench.bare_relay", "--port",
                                                     str(relay_port)],
                              env={"BENCH_UPSTREAM": stack.mock.url}, port=relay_port)
    gw = stack.procs.start("gateway-daphne", [sys.executable, "-m", "daphne", *DAPHNE_ARGS, "-p", str(gw_port),
                                              "gateway.asgi:application"],
                           env=gateway_env(stack.sqlite_url), port=gw_port)
    try:
        relay.wait_http("/healthz")
        gw.wait_http("/healthz")
        assert stack.mock.port and stack.relay.port and stack.gateway.port
        route = ROUTES[0]
        named = {"direct": direct_target(route.upstream, stack.mock.port, TEXT_MODEL, False),
                 "bare relay, Daphne": relay_target(route.upstream, stack.relay.port, TEXT_MODEL, False),
                 "bare relay, uvicorn": relay_target(route.upstream, relay_port, TEXT_MODEL, False),
                 "gateway, Daphne": gateway_target(route, gw_port, TEXT_MODEL, False),
                 "gateway, uvicorn": gateway_target(route, stack.gateway.port, TEXT_MODEL, False)}
        for name, tgt in named.items():
            tgt["name"] = name
        lat = stack.loadgen.run({"kind": "interleaved", "targets": list(named.values()),
                                 "rounds": plan.latency_rounds, "duration": plan.latency_max_s,
                                 "warmup_rounds": 30})["latency_ms"]
        direct = lat["direct"].get("p50")
        out: dict[str, Any] = {"route": route.name}
        for name, tgt in list(named.items())[1:]:
            rate = closed_loop(stack, [tgt], 16, plan)
            out[name] = {"added_p50_ms": _diff(lat[name].get("p50"), direct), "rps_c16": rate["rps"]}
            print(f"   {name:<22} c=1 +{out[name]['added_p50_ms']} ms p50 over direct; c=16 {rate['rps']:,.0f} req/s")
        for server in ("Daphne", "uvicorn"):
            share = _ratio(out[f"gateway, {server}"]["rps_c16"], out[f"bare relay, {server}"]["rps_c16"])
            out[f"share_of_bare_relay_on_{server.lower()}_c16"] = share
            print(f"   gateway on {server}, c=16: {share} of the bare relay on {server}")
        return out
    finally:
        stack.procs.stop(gw)
        stack.procs.stop(relay)


PASSTHROUGH_ROUTES = [Route("openai_chat", "openai_chat"), Route("anthropic", "anthropic"),
                      Route("responses", "responses")]
PASSTHROUGH_TARGET = 0.9  # same protocol, JSON and streams
TRANSLATED_TARGET = 0.6
STORED_TARGET = 0.8  # a stored Responses exchange (the answer kept for previous_response_id)


def _own_relay(stack: Stack) -> tuple[Child, int]:
    port = free_port()
    relay = stack.procs.start("bare-relay-uvicorn", [sys.executable, "-m", "bench.bare_relay", "--port", str(port)],
                              env={"BENCH_UPSTREAM": stack.mock.url}, port=port)
    relay.wait_http("/healthz")
    return relay, port


def _unstored(tgt: dict[str, Any], port: int, route: Route, model: str, stream: bool, relay: bool) -> dict[str, Any]:
    """``tgt`` (a Responses request to the gateway or the relay) with ``store: false`` in its body."""

    name, key = (model, f"{UPSTREAM_KEY}-{route.upstream}") if relay else (f"{PROVIDERS[route.upstream]}/{model}",
                                                                          CLIENT_KEY)
    payload = {**body(route.client, name, stream), "store": False}
    return {**tgt, "request": raw_request(port, PATHS[route.client], payload, key)}


def _passthrough_cases(stack: Stack, relay_port: int, model: str, stream: bool) -> list[tuple[str, dict[str, Any]]]:
    """(row name, {gateway, relay, translated} targets) for each same-protocol route; Responses twice,
    ``store: false`` and stored (the gateway keeps the answer), the relay's with ``store: false``."""

    port = stack.gateway.port
    assert port
    cases = []
    for r in PASSTHROUGH_ROUTES:
        translated = Route(r.client, "anthropic" if r.client == "openai_chat" else "openai_chat")
        named = {"gateway": gateway_target(r, port, model, stream),
                 "relay": relay_target(r.upstream, relay_port, model, stream),
                 "translated": gateway_target(translated, port, model, stream)}
        if r.client != "responses":
            cases.append((r.name, named))
            continue
        unstored = {"gateway": _unstored(named["gateway"], port, r, model, stream, False),
                    "relay": _unstored(named["relay"], relay_port, r, model, stream, True),
                    "translated": _unstored(named["translated"], port, translated, model, stream, False)}
        cases.append((r.name, unstored))
        # the unstored run beside it as well, for what storing costs measured in the same slices
        cases.append((f"{r.name} stored", {**named, "relay": unstored["relay"], "unstored": unstored["gateway"]}))
    return cases


def _median_share(runs: list[dict[str, Any]], relay: list[dict[str, Any]]) -> float | None:
    """The median of the slices' shares: each slice's rate over the relay's slice beside it."""

    shares = [s for s in (_ratio(g["rps"], b["rps"]) for g, b in zip(runs, relay, strict=True)) if s is not None]
    return round(statistics.median(shares), 3) if shares else None


def _median_cost(runs: list[dict[str, Any]], other: list[dict[str, Any]]) -> float | None:
    """The median of the slices' CPU per request of ``runs`` over ``other``'s in the slice beside it."""

    def per_request(p: dict[str, Any]) -> float | None:
        return p["cpu_s"]["gateway"] / p["watched_requests"] if p["watched_requests"] else None

    costs = [c for c in (_ratio(per_request(a), per_request(b)) for a, b in zip(runs, other, strict=True))
             if c is not None]
    return round(statistics.median(costs), 3) if costs else None


def passthrough(stack: Stack, plan: Plan) -> dict[str, Any]:
    """Same protocol on both sides against the bare relay on the gateway's own server, c=16 and c=64
    (quick runs: c=16), JSON and streams.

    Each route's gateway run, its relay run and its translated run take turns in ``plan.slices``
    slices, so that the machine's drift weighs on all three; a share is the median of the slices'
    shares (each slice's gateway rate over the relay's next to it) and, beside it, the rate over all
    slices. Beside each route, the same client translated (its protocol to Chat; Chat to Anthropic),
    which is what the passthrough replaced. Responses runs twice: with ``store: false`` (the relay
    stores nothing either) and stored (the gateway keeps the answer for ``previous_response_id``),
    both against the relay's ``store: false``.
    """

    relay, relay_port = _own_relay(stack)
    levels = (16,) if plan.quick else (16, 64)
    try:
        out: dict[str, Any] = {"concurrency": list(levels), "chunks_per_stream": 20, "routes": {}}
        for c in levels:
            for stream, model in ((True, STREAM_MODEL), (False, TEXT_MODEL)):
                kind = "stream" if stream else "json"
                for name, named in _passthrough_cases(stack, relay_port, model, stream):
                    parts: dict[str, list[dict[str, Any]]] = {n: [] for n in named}
                    order = list(named.items())
                    for k in range(plan.slices):
                        for n, tgt in (order if k % 2 == 0 else order[::-1]):
                            res = closed_loop(stack, [tgt], c, plan, duration=plan.duration / plan.slices,
                                              pids={**stack.pids(), "relay": relay.pid})
                            res["server"] = "relay" if n == "relay" else "gateway"
                            parts[n].append(res)
                    runs = {n: _combine(p) for n, p in parts.items()}
                    row = f"{name} {kind}" + ("" if c == 16 else f" c={c}")
                    out["routes"][row] = {
                        "concurrency": c, "gateway_rps": runs["gateway"]["rps"], "relay_rps": runs["relay"]["rps"],
                        "of_bare_relay": _median_share(parts["gateway"], parts["relay"]),
                        "of_bare_relay_all_slices": _ratio(runs["gateway"]["rps"], runs["relay"]["rps"]),
                        "translated_rps": runs["translated"]["rps"],
                        "translated_of_bare_relay": _median_share(parts["translated"], parts["relay"]),
                        "errors": runs["gateway"]["errors"] + runs["translated"]["errors"],
                        "gateway_cpu_ms_per_request": runs["gateway"]["server_cpu_ms_per_request"],
                        "relay_cpu_ms_per_request": runs["relay"]["server_cpu_ms_per_request"],
                        "translated_cpu_ms_per_request": runs["translated"]["server_cpu_ms_per_request"]}
                    v = out["routes"][row]
                    if "unstored" in parts:
                        v["cpu_of_unstored"] = _median_cost(parts["gateway"], parts["unstored"])
                    print(f"   {row:<34} gateway {v['gateway_rps']:>7,.0f}/s  relay {v['relay_rps']:>7,.0f}/s  "
                          f"share {v['of_bare_relay']}  translated {v['translated_rps']:,.0f}/s "
                          f"({v['translated_of_bare_relay']})  cpu ms/req {v['gateway_cpu_ms_per_request']} "
                          f"vs relay {v['relay_cpu_ms_per_request']}"
                          + (f"  ×{v['cpu_of_unstored']} of unstored" if "cpu_of_unstored" in v else ""))
        return out
    finally:
        stack.procs.stop(relay)


def spool(stack: Stack, plan: Plan) -> dict[str, Any]:
    """What the log spool costs: chat→chat JSON at c=16, the same gateway with and without it.

    The spool is one ``write`` per finished request (the record, before anything else), so a
    SIGKILL loses no row; the question is its share of throughput. The spool-less gateway has its
    own SQLite file so that the two never share a writer; they take turns in ``plan.slices`` slices.
    """

    urls = {name: f"sqlite:///{stack.workdir / (name + '.sqlite3')}" for name in ("spool", "no-spool")}
    for url in urls.values():
        prepare_database(stack.procs, stack.workdir, url, stack.mock.url)
    with_spool = stack.procs.gateway("gateway-spool", {**gateway_env(urls["spool"]),
                                                       "GATEWAY_LOG_SPOOL_DIR": str(stack.workdir / "spool")})
    without = stack.procs.gateway("gateway-no-spool", {**gateway_env(urls["no-spool"]), "GATEWAY_LOG_SPOOL_DIR": ""})
    try:
        route = ROUTES[0]
        assert with_spool.port and without.port
        named = {"with spool": gateway_target(route, with_spool.port, TEXT_MODEL, False),
                 "without spool": gateway_target(route, without.port, TEXT_MODEL, False)}
        parts: dict[str, list[dict[str, Any]]] = {name: [] for name in named}
        order = list(named.items())
        for k in range(plan.slices * 2):
            for name, tgt in (order if k % 2 == 0 else order[::-1]):
                pid = with_spool.pid if name == "with spool" else without.pid
                res = closed_loop(stack, [tgt], 16, plan, duration=plan.duration / plan.slices,
                                  pids={**stack.pids(), "gateway": pid})
                res["server"] = "gateway"
                parts[name].append(res)
        runs = {name: _combine(p) for name, p in parts.items()}
    finally:
        stack.procs.stop(without)
        stack.procs.stop(with_spool)
    share = _ratio(runs["with spool"]["rps"], runs["without spool"]["rps"])
    print(f"   with spool {runs['with spool']['rps']:,.0f}/s, without {runs['without spool']['rps']:,.0f}/s: "
          f"{share} of the spool-less rate")
    return {"route": route.name, "concurrency": 16, "with_spool_rps": runs["with spool"]["rps"],
            "without_spool_rps": runs["without spool"]["rps"], "ratio": share,
            "cpu_ms_per_request": {n: r["server_cpu_ms_per_request"] for n, r in runs.items()}}


TURNS = 10


def _conversation_turns(client: Any, url: str, model: str, stateful: bool) -> list[float]:
    """One 10-turn Responses conversation; each turn's latency in ms. ``stateful``: each turn names
    the previous answer by ``previous_response_id`` (the gateway reads and writes its store);
    otherwise the client sends the whole history itself with ``store: false`` (no store at all)."""

    history: list[dict[str, Any]] = []
    previous: str | None = None
    times = []
    for turn in range(TURNS):
        said = {"role": "user", "content": f"Turn {turn}: tell me one more thing about the kettle."}
        body: dict[str, Any] = {"model": model}
        if stateful:
            body["input"] = [said]
            if previous:
                body["previous_response_id"] = previous
        else:
            body.update(input=[*history, said], store=False)
        t0 = time.perf_counter()
        response = client.post(url, json=body)
        times.append((time.perf_counter() - t0) * 1000)
        response.raise_for_status()
        answer = response.json()
        previous = answer["id"]
        text = "".join(part.get("text", "") for item in answer["output"] if item.get("type") == "message"
                       for part in item.get("content", []))
        history += [said, {"role": "assistant", "content": text}]
    return times


def conversation(stack: Stack, plan: Plan) -> dict[str, Any]:
    """A 10-turn ``previous_response_id`` conversation against the same turns sent whole, per upstream.

    The added latency of a turn is what keeping the conversation costs the client: the stored
    chain read back (and written out for a Chat or Messages upstream), the answer stored before
    the last event. The two kinds of conversation take turns, ``rounds`` of each.
    """

    import httpx

    assert stack.gateway.port
    url = f"http://{HOST}:{stack.gateway.port}/v1/responses"
    rounds = 5 if plan.quick else 20
    out: dict[str, Any] = {"turns": TURNS, "rounds": rounds, "upstreams": {}}
    with httpx.Client(headers={"authorization": f"Bearer {CLIENT_KEY}"}, timeout=30) as client:
        for upstream, provider in PROVIDERS.items():
            model = f"{provider}/{TEXT_MODEL}"
            kept: list[list[float]] = []
            whole: list[list[float]] = []
            _conversation_turns(client, url, model, True)  # warm-up
            for k in range(rounds):
                for stateful in ((True, False) if k % 2 == 0 else (False, True)):
                    (kept if stateful else whole).append(_conversation_turns(client, url, model, stateful))
            per_turn = [round(statistics.median(r[t] for r in kept) - statistics.median(r[t] for r in whole), 2)
                        for t in range(TURNS)]
            out["upstreams"][upstream] = {
                "added_ms_per_turn": per_turn, "added_ms_mean": round(statistics.fmean(per_turn), 2),
                "stateful_p50_ms": [round(statistics.median(r[t] for r in kept), 2) for t in range(TURNS)],
                "whole_history_p50_ms": [round(statistics.median(r[t] for r in whole), 2) for t in range(TURNS)]}
            print(f"   {upstream:<12} previous_response_id adds {out['upstreams'][upstream]['added_ms_mean']} ms "
                  f"a turn on average (turns 1–{TURNS}: {per_turn})")
    return out


MEASURES = {"conversation": conversation, "spool": spool, "latency": latency, "throughput": throughput, "streams": streams, "paced": paced, "hold": hold,
            "multiproc": multiproc, "profile": profile, "profile_stream": profile_stream, "profile_passthrough": profile_passthrough,
            "profile_stored": profile_stored, "profile_unstored": profile_unstored, "servers": servers,
            "passthrough": passthrough}


def run(names: list[str], plan: Plan, on_result: Any = None) -> dict[str, Any]:
    """Start the stack, run the named measurements in order, stop everything."""

    results: dict[str, Any] = {"loadavg_before": loadavg()}
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp, Processes(Path(tmp)) as procs:
        t0 = time.monotonic()
        stack = setup(procs, Path(tmp))
        results["setup_seconds"] = round(time.monotonic() - t0, 1)
        for name in names:
            t0 = time.monotonic()
            print(f"… {name}", flush=True)
            try:
                results[name] = MEASURES[name](stack, plan)
            except (RuntimeError, OSError) as exc:
                results[name] = {"failed": f"{type(exc).__name__}: {exc}"}
            results[name]["seconds"] = round(time.monotonic() - t0, 1)
            if on_result is not None:
                on_result(name, results[name])
    return results
