"""``python -m bench [--quick] [--only NAME[,NAME…]]`` — the benchmark suite (``make bench``).

Sub-benchmarks: ``translation`` (in this process, one core); ``features`` (what metrics
and a key's limits and budgets add to a request, in a child process); against real
processes, ``latency``, ``throughput``, ``streams``, ``paced``, ``hold``,
``multiproc`` (``gateway`` is shorthand for all of these); ``dashboard``
(``bench/dashboard_bench.py``: dashboard pages on a big request log, in a child
process); ``agents`` (``bench/agents.py``: agent sessions over rate-limited pools, today's
selection against session affinity and quota tracking); ``profile`` runs only when named. A full run writes ``artifacts/bench.json``; a run
with ``--only`` writes ``artifacts/bench-<names>.json`` so that it never
overwrites the figures of a full run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import platform
import sys
import time
from typing import Any

from . import agents, features, gateway, report, translation
from .procs import ROOT
from .procstat import loadavg

ALL = ["translation", "features", *gateway.SECTIONS, "dashboard", "agents"]
KNOWN = [*ALL, *gateway.EXTRA_SECTIONS, "gateway"]


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs (about 2 minutes in all)")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help=f"run only these (repeat or comma-separate): {', '.join(KNOWN)}")
    args = parser.parse_args(argv)
    names: list[str] = []
    for item in args.only:
        for name in filter(None, (n.strip() for n in item.split(","))):
            if name not in KNOWN:
                parser.error(f"unknown benchmark {name!r}; choose from {', '.join(KNOWN)}")
            names += gateway.SECTIONS if name == "gateway" else [name]
    args.names = [n for n in KNOWN if n in names] if names else ALL
    return args


def dashboard(quick: bool) -> dict[str, Any]:
    """The dashboard helper's benchmark (its own module and child process); its figures as it returns them."""

    print("… dashboard (bench/dashboard_bench.py)", flush=True)
    try:
        from . import dashboard_bench

        return dict(dashboard_bench.run(quick=quick))
    except (ImportError, AttributeError) as exc:
        return {"skipped": f"bench/dashboard_bench.py is not usable: {exc}"}
    except (subprocess.SubprocessError, OSError, ValueError) as exc:
        return {"failed": f"{type(exc).__name__}: {exc}"}


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    started = time.monotonic()
    results: dict[str, Any] = {
        "meta": {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "quick": args.quick, "benchmarks": args.names,
                 "cpus": os.cpu_count(), "python": platform.python_version(), "loadavg_at_start": loadavg()},
    }
    print(f"bench: {', '.join(args.names)}{' (quick)' if args.quick else ''}; "
          f"{os.cpu_count()} CPUs, load average {loadavg()}", flush=True)
    try:
        if "translation" in args.names:
            results["translation"] = translation.run(quick=args.quick)
        if "features" in args.names:
            print("… features (bench/features.py): metrics, limits and buckets per request", flush=True)
            results["features"] = features.run(quick=args.quick)
        process_names = [n for n in args.names if n in gateway.MEASURES]
        if process_names:
            results["gateway"] = gateway.run(process_names, gateway.Plan.for_mode(args.quick))
        if "dashboard" in args.names:
            results["dashboard"] = dashboard(args.quick)
        if "agents" in args.names:
            results["agents"] = agents.run(quick=args.quick)
    except KeyboardInterrupt:
        print("\ninterrupted: every benchmark process has been stopped", file=sys.stderr)
        return 130
    if "gateway" in results:
        report.print_gateway_table(results["gateway"])
    results["targets"] = report.targets(results)
    report.print_targets(results["targets"])
    results["meta"]["seconds"] = round(time.monotonic() - started, 1)
    results["meta"]["loadavg_at_end"] = loadavg()
    suffix = "" if args.names == ALL else "-" + "-".join(args.names)
    report.write_json(ROOT / "artifacts" / f"bench{suffix}.json", results)
    print(f"bench took {results['meta']['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
