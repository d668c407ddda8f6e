"""The compact table, the targets of issue 6 checked against one run, and artifacts/bench.json."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .targets import ROUTES, SHORT, UPSTREAMS

TRANSLATION_TARGET = 100_000


def _f(value: Any, fmt: str = "{:.2f}", none: str = "—") -> str:
    return none if value is None else fmt.format(value)


def _pct(value: Any) -> str:
    return "—" if value is None else f"{value * 100:.0f}%"


def _rps(section: dict[str, Any] | None, name: str) -> Any:
    if not section or "runs" not in section:
        return None
    return section["runs"].get(name, {}).get("rps")


def print_gateway_table(g: dict[str, Any]) -> None:
    lat, tp, st, pc = g.get("latency", {}), g.get("throughput", {}), g.get("streams", {}), g.get("paced", {})
    levels = [k for k in tp if k.startswith("c=")] if isinstance(tp, dict) else []
    if lat or tp or st or pc:
        _print_rates(lat, tp, st, pc, levels, g)
    _print_processes(g)


def _print_rates(lat: dict[str, Any], tp: dict[str, Any], st: dict[str, Any], pc: dict[str, Any],
                 levels: list[str], g: dict[str, Any]) -> None:
    print("\n== Gateway vs direct vs bare relay (same run, same scripted upstream) ==")
    head = f"{'':<26}{'+p50 ms':>8}{'+p99 ms':>8}"
    for lv in levels:
        head += f"{lv + ' rps':>16}"
    cpu_level = "c=16" if "c=16" in levels else (levels[-1] if levels else None)
    head += f"{'CPU ms/req':>11}{'streams/s':>16}{'+TTFB ms':>9}{'+gap p99':>9}{'errors':>8}"
    print(head)

    def row(label: str, name: str, added: tuple[Any, Any], ttfb: Any, gap: Any, upstream: str | None) -> None:
        line = f"{label:<26}{_f(added[0], '{:+.2f}'):>8}{_f(added[1], '{:+.2f}'):>8}"
        for lv in levels:
            rps = _rps(tp.get(lv), name)
            share = ""
            if upstream is not None and rps is not None:
                bare = _rps(tp.get(lv), f"bare relay {SHORT[upstream]}")
                share = f" ({_pct(rps / bare if bare else None)})"
            line += f"{_f(rps, '{:,.0f}') + share:>16}"
        run = tp.get(cpu_level, {}).get("runs", {}).get(name, {}) if cpu_level else {}
        line += f"{_f(run.get('server_cpu_ms_per_request'), '{:.2f}'):>11}"
        srps = _rps(st, name)
        share = ""
        if upstream is not None and srps is not None:
            bare = _rps(st, f"bare relay {SHORT[upstream]}")
            share = f" ({_pct(srps / bare if bare else None)})"
        line += f"{_f(srps, '{:,.0f}') + share:>16}{_f(ttfb, '{:+.2f}'):>9}{_f(gap, '{:+.2f}'):>9}"
        line += f"{_errors(name, lat, tp, st, pc):>8}"
        print(line)

    for u in UPSTREAMS:
        row(f"direct {SHORT[u]}", f"direct {SHORT[u]}", (None, None), None, None, None)
    for u in UPSTREAMS:
        b = lat.get("bare_relay", {}).get(SHORT[u], {})
        p = pc.get("bare_relay", {}).get(SHORT[u], {})
        row(f"bare relay {SHORT[u]}", f"bare relay {SHORT[u]}", (b.get("added_p50_ms"), b.get("added_p99_ms")),
            p.get("added_ttfb_p50_ms"), p.get("added_gap_p99_ms"), None)
    for r in ROUTES:
        a = lat.get("routes", {}).get(r.name, {})
        p = pc.get("routes", {}).get(r.name, {})
        row(f"gateway {r.name}", f"gateway {r.name}", (a.get("added_p50_ms"), a.get("added_p99_ms")),
            p.get("added_ttfb_p50_ms"), p.get("added_gap_p99_ms"), r.upstream)
    legend = ["+ = added over calling the scripted upstream directly", "(%) = share of the bare relay's figure"]
    if cpu_level:
        legend.append(f"CPU ms/req: the server's own CPU per request at {cpu_level}")
    if st:
        legend.append(f"streams: {st.get('chunks_per_stream')} chunks at c={st.get('concurrency')}")
    if pc:
        legend.append("TTFB and gaps: 64 deltas × 20 ms")
    print("(" + "; ".join(legend) + ")")
    peaks = _loadgen_peaks(tp, st)
    if peaks:
        print("load generator CPU, highest share of one core: "
              + ", ".join(f"{kind} {peak * 100:.0f}%" for kind, peak in peaks.items())
              + f"; {_loadgen_peak(g) * 100:.0f}% in any measurement")


def _print_processes(g: dict[str, Any]) -> None:
    h = g.get("hold", {})
    for variant in ("paced", "long"):
        v = h.get(variant)
        if not v:
            continue
        dur = v["stream_duration_ms"]
        print(f"\n{v['streams']:,} concurrent streams ({v['model']}) on one gateway process ({h['route']}): "
              f"completed {v['completed']}/{v['streams']}, stalled {v['stalled']}, errors {v['errors']}; "
              f"{v['peak_connected']} in flight at once, at most {v['peak_active']} of them streaming\n"
              f"   RSS {v['rss_before_kb'] / 1024:.0f} → {v['rss_peak_kb'] / 1024:.0f} MiB: "
              f"{_f(v['rss_per_stream_kb'], '{:.1f}')} KiB per stream in flight; gateway CPU "
              f"{_f(v['gateway_cpu_s_per_1000'])} s per 1,000 streams; time to first byte p50/p99 "
              f"{_f(v['ttfb_ms'].get('p50'), '{:.0f}')}/{_f(v['ttfb_ms'].get('p99'), '{:.0f}')} ms; "
              f"stream duration p50/p99 {_f(dur.get('p50'), '{:.0f}')}/{_f(dur.get('p99'), '{:.0f}')} ms")
    m = g.get("multiproc", {})
    if m and "ratio" in m:
        print(f"Two gateway processes on PostgreSQL ({m['route']}, c={m['concurrency']}): "
              f"{m['one_process']['rps']:,.0f} → {m['two_processes']['rps']:,.0f} req/s = {m['ratio']:.2f}× "
              f"(errors {m['one_process']['errors']} / {m['two_processes']['errors']}); a one-account pool "
              f"at c=64 on one process: {m['single_account_pool']['ok']} ok, "
              f"{m['single_account_pool']['errors']} errors {m['single_account_pool']['error_samples']}")
        for label, key in (("one process", "one_process"), ("two processes", "two_processes")):
            shares = ", ".join(f"{k} {v:.2f}" for k, v in m[key]["cpu_frac"].items() if v)
            busy = sum(m[key]["cpu_frac"].values())
            per_core = m[key].get("rps_per_gateway_core")
            print(f"   CPU in cores with {label}: {shares} (machine {busy:.2f} of {os.cpu_count()}); "
                  f"{_f(per_core, '{:,.0f}')} req/s per gateway core")
    elif m.get("skipped"):
        print(f"Two gateway processes on PostgreSQL: skipped ({m['skipped']})")
    for name, section in g.items():
        if isinstance(section, dict) and "failed" in section:
            print(f"!! {name} failed: {section['failed']}")


def _errors(name: str, *sections: dict[str, Any]) -> str:
    """Failed requests of one row over all its runs (non-200, no terminator, network)."""

    total = 0
    for section in sections:
        for node in [section, *(v for v in section.values() if isinstance(v, dict))]:
            run = node.get("runs", {}).get(name) if isinstance(node.get("runs"), dict) else None
            if run:
                total += run.get("errors", 0)
            per = node.get("per_target", {}).get(name) if isinstance(node.get("per_target"), dict) else None
            if per:
                total += per.get("errors", 0) + per.get("stalled", 0)
    return str(total)


def _loadgen_peaks(tp: dict[str, Any], st: dict[str, Any]) -> dict[str, float]:
    """The load generator's highest CPU share while measuring each kind of server."""

    peaks: dict[str, float] = {}
    for section in [*(v for v in tp.values() if isinstance(v, dict)), st]:
        for name, run in section.get("runs", {}).items():
            kind = name.rsplit(" ", 1)[0] if not name.startswith("gateway") else "gateway"
            peaks[kind] = max(peaks.get(kind, 0.0), run.get("loadgen_cpu_frac", 0.0))
    return peaks


def _loadgen_peak(g: dict[str, Any]) -> float:
    peaks: list[float] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "loadgen_cpu_frac" and isinstance(v, (int, float)):
                    peaks.append(float(v))
                else:
                    walk(v)

    walk(g)
    return max(peaks, default=0.0)


def _worst(values: list[Any], higher_is_better: bool) -> Any:
    known = [v for v in values if v is not None]
    if not known:
        return None
    return min(known) if higher_is_better else max(known)


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 6's targets, each with the worst route's figure."""

    out: list[dict[str, Any]] = []

    def check(name: str, value: Any, limit: float, higher_is_better: bool, unit: str = "") -> None:
        met = None if value is None else (value >= limit if higher_is_better else value <= limit)
        out.append({"target": name, "value": value, "limit": limit, "unit": unit,
                    "higher_is_better": higher_is_better, "met": met})

    tr = results.get("translation", {}).get("cases", {})
    if tr:
        # Per CPU-second of the best round: the per-core figure even on a shared, noisy machine.
        check("translation text-delta events per CPU-second (slowest pair, best round)",
              _worst([c["best_round_events_per_cpu_s"] for c in tr.values()], True), TRANSLATION_TARGET, True,
              "events/s")
    g = results.get("gateway", {})
    routes = [r.name for r in ROUTES]
    tp = g.get("throughput", {})
    for level in ("c=16", "c=64"):
        if level in tp:
            check(f"non-streaming throughput {level}, share of bare relay (worst route)",
                  _worst([tp[level]["routes"][r]["of_bare_relay"] for r in routes], True), 0.5, True)
    if "routes" in g.get("streams", {}):
        check("streams/s, share of bare relay (worst route)",
              _worst([g["streams"]["routes"][r]["of_bare_relay"] for r in routes], True), 0.5, True)
    if "routes" in g.get("latency", {}):
        check("added latency p50 at c=1 (worst route)",
              _worst([g["latency"]["routes"][r]["added_p50_ms"] for r in routes], False), 1.5, False, "ms")
    if "routes" in g.get("paced", {}):
        check("added time to first byte p50, paced (worst route)",
              _worst([g["paced"]["routes"][r]["added_ttfb_p50_ms"] for r in routes], False), 2.0, False, "ms")
        check("added inter-chunk gap p99, paced (worst route)",
              _worst([g["paced"]["routes"][r]["added_gap_p99_ms"] for r in routes], False), 5.0, False, "ms")
    pt = g.get("passthrough", {}).get("routes", {})
    for kind, what in (("stream", "streams/s"), ("json", "JSON requests/s")):
        rows = {k: v for k, v in pt.items() if f" {kind}" in k}
        shares = [v["of_bare_relay"] for k, v in rows.items() if "stored" not in k]
        if shares:
            check(f"same-protocol {what}, share of the bare relay on the gateway's own server (worst route)",
                  _worst(shares, True), 0.9, True)
        stored = [v["of_bare_relay"] for k, v in rows.items() if "stored" in k]
        if stored:
            check(f"stored Responses {what}, share of the bare relay (worst)", _worst(stored, True), 0.8, True)
        costs = [v["cpu_of_unstored"] for k, v in rows.items() if v.get("cpu_of_unstored") is not None]
        if costs:
            check(f"stored Responses {what}, CPU per request over store: false's (worst)",
                  _worst(costs, False), 1.25, False, "×")
        translated = [v.get("translated_of_bare_relay") for k, v in rows.items() if "stored" not in k]
        if [t for t in translated if t is not None]:
            check(f"translated {what}, share of the bare relay (worst route)", _worst(translated, True), 0.6, True)
    h = g.get("hold", {})
    held = [h[v] for v in ("paced", "long") if v in h]
    if held:
        check(f"{h['streams']:,} concurrent streams not finished with their terminator (errors, stalls)",
              max(v["streams"] - v["completed"] for v in held), 0, False)
        check("resident memory per stream in flight", max(v["rss_per_stream_kb"] or 0 for v in held),
              100, False, "KiB")
        if h["streams"] >= 10_000:  # the lean path's target holds for this many at once
            check(f"resident memory per stream in flight, {h['streams']:,} at once (lean path)",
                  max(v["rss_per_stream_kb"] or 0 for v in held), 50, False, "KiB")
    sv = g.get("servers", {})
    if "gateway, uvicorn" in sv:
        check("added latency p50 at c=1 over the upstream direct, gateway on uvicorn (lean path)",
              sv["gateway, uvicorn"].get("added_p50_ms"), 0.25, False, "ms")
    d = results.get("dashboard", {})
    if "worst_ms" in d:
        check(f"slowest dashboard page, {d.get('rows', 0):,} request-log rows", d["worst_ms"],
              d.get("target_ms", 300.0), False, "ms")
    f = results.get("features", {})
    if "metrics_us_per_request" in f:
        check("metrics: added per request", f["metrics_us_per_request"], 50.0, False, "µs")
        check("a key's rate, token, concurrency and four USD budget limits: added per request",
              f["limits"]["added_us"], 250.0, False, "µs")
        if "usage_headers" in f:
            check("Claude Code's usage-limit headers of a capped key's answer: written per request",
                  f["usage_headers"]["headers_alone_us"], 20.0, False, "µs")
        if "log_writer_buckets" in f:
            check("log writer: usage and spend buckets in three tiers, per logged request",
                  f["log_writer_buckets"]["three_tiers_us"], 100.0, False, "µs")
    ag = results.get("agents", {})
    if "new" in ag:
        new = ag["new"]
        check("agents: upstream 429s, share of requests (new selection)", new.get("upstream_429_share"), 0.02, False)
        check("agents: errors seen by clients (new selection)", new.get("client_errors"), 0, False)
        check("agents: busiest account's requests ÷ its fair share (new selection)",
              new.get("busiest_over_fair_share"), 2.0, False)
        if ag.get("ideal", {}).get("cache_share"):
            check("agents: cacheable input read from cache, against the single-account ideal",
                  new.get("cache_share_of_ideal"), 0.9, True)
        check("agents: affinity and quota tracking, added per request",
              ag.get("in_process", {}).get("added_us_per_request"), 20.0, False, "µs")
    conv = g.get("conversation", {})
    for upstream, figures in conv.get("upstreams", {}).items():
        check(f"a {conv['turns']}-turn previous_response_id conversation, added latency per turn ({upstream})",
              figures["added_ms_mean"], 5.0, False, "ms")
    sp = g.get("spool", {})
    if "ratio" in sp:
        check("throughput with the log spool, of without it (c=16)", sp["ratio"], 0.98, True, "×")
    m = g.get("multiproc", {})
    if "ratio" in m:
        check("two processes on PostgreSQL vs one (c=64)", m["ratio"], 1.8, True, "×")
    return out


def print_targets(rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    print("\n== Targets ==")
    for row in rows:
        mark = {True: "met", False: "NOT met", None: "n/a"}[row["met"]]
        op = "≥" if row["higher_is_better"] else "≤"
        value = row["value"]
        shown = "—" if value is None else (f"{value:,.3g}" if isinstance(value, float) else f"{value:,}")
        print(f"  [{mark:>7}] {row['target']}: {shown} {row['unit']} (target {op} {row['limit']:,} {row['unit']})")


def write_json(path: Path, results: dict[str, Any]) -> None:
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print(f"\nfigures written to {path}")
