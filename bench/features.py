"""What metrics, budgets, the dashboard's buckets and encryption at rest add to each request:
``python -m bench.features [--json PATH]``.

Both run on every request of a key that has them, on the event loop, so their cost is a number
of microseconds per request, measured here in a child process (Django configured per process)
with the gateway's own objects: the Prometheus observer fed one finished request's record
(``gateway.log.metrics.RequestMetrics.observe``, priced, two attempts), and a key's limits admitted
and settled (``gateway.limits.Limits``, in-process store) for a key with a rate limit, a daily
token limit and four USD budgets, against a key with none. ``python -m bench`` relates them to
the gateway's own CPU per request from the throughput section.

The usage-limit headers of a capped key's answers (Claude Code's ``anthropic-ratelimit-unified-*``,
``gateway.limits.standing``): the standing of each USD budget is taken from what admitting the
request read anyway (counted in the limits' figure above), and the headers are written from it;
measured: a key with four USD budgets admitted with and without its standings written out as headers.

The configuration cache's ``get`` is measured with the per-request read of the configuration's
version that SQLite deployments make (``gateway.configwatch``) against the same cache without it.

The log writer's bucket sinks (``dashboard.rollup.add``, ``dashboard.spend.add``) run off the request
path, in the writer's thread, but on the same CPU: their cost per logged request is measured with the
three tiers (five minutes, hour, day) against the five-minute tier alone, interleaved in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 20_000


def configure() -> None:
    os.environ.update({"DJANGO_SETTINGS_MODULE": "gateway.settings", "DEBUG": "0", "LOG_LEVEL": "WARNING",
                       "SECRET_KEY": "bench-only-secret-key", "DATABASE_URL": "sqlite:///:memory:"})
    os.environ.pop("REDIS_URL", None)
    os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def metrics_us(rounds: int) -> float:
    from accounts.outcomes import Verdict
    from gateway.log.metrics import RequestMetrics
    from gateway.log.record import Attempt, LogRecord

    providers: dict[int, Any] = {1: SimpleNamespace(name="up", prices={"*": {"input": 0.25, "output": 2}},
                                                    served_models=("gpt-5-mini",))}
    m = RequestMetrics(lambda: providers)
    record = LogRecord(request_id="r", client_protocol="openai_chat", client_key_name="team", provider_id=1,
                       model_requested="gpt-5-mini", model_sent="gpt-5-mini", status=200, latency_ms=900,
                       ttfb_ms=200, input_tokens=1200, output_tokens=300,
                       attempts=[Attempt(1, "a", 429, Verdict.RETRY, 5), Attempt(2, "b", 200, Verdict.OK, 800)])
    m.observe(record)  # the label children are made once, on a key's first request
    t0 = time.perf_counter()
    for _ in range(rounds):
        m.observe(record)
    return (time.perf_counter() - t0) / rounds * 1e6


def limits_us(rounds: int) -> dict[str, float]:
    from gateway.limits import Limits
    from gateway.log.record import LogRecord
    from gateway.state import KeyInfo

    prices = {"*": {"input": 0.25, "output": 2}}
    plain = KeyInfo(id=1, name="plain", allowed_models=(), rate_limit_per_minute=None, daily_token_limit=None)
    limited = KeyInfo(id=2, name="limited", allowed_models=(), rate_limit_per_minute=1_000_000_000,
                      daily_token_limit=10**15, max_concurrent_requests=1000,
                      usd_budgets=(("5h", 10**12), ("day", 10**12), ("week", 10**12), ("month", 10**12)))
    record = LogRecord(request_id="r", client_protocol="openai_chat", status=200, model_sent="gpt-5-mini",
                       input_tokens=1200, output_tokens=300)

    async def nothing_logged(*_: Any) -> dict[int, int]:
        return {}

    async def per_request(key: KeyInfo) -> float:
        limits = Limits()
        limits.usage.since = nothing_logged  # type: ignore[method-assign]  # the bench has no log to read
        estimate = lambda budget: 1500  # noqa: E731 - the shape admit takes

        async def one(i: int) -> None:
            hold = await limits.admit(key, f"r{i}", estimate, prices)
            hold.settle(record)
            for _ in range(3):  # settling hands the counters back in tasks of their own: let them run
                await asyncio.sleep(0)

        for i in range(200):  # warm: each period's counter read once
            await one(i)
        t0 = time.perf_counter()
        for i in range(rounds):
            await one(i)
        took = time.perf_counter() - t0
        await limits.aclose()
        return took / rounds * 1e6

    async def both() -> dict[str, float]:
        none, full = await per_request(plain), await per_request(limited)
        return {"key_without_limits_us": round(none, 2), "key_with_limits_and_usd_budgets_us": round(full, 2),
                "added_us": round(full - none, 2)}

    return asyncio.run(both())


def usage_headers_us(rounds: int) -> dict[str, float]:
    """Per answer of a key with four USD budgets (one 80 % full): its standings taken at admission, the
    headers written from them; and, apart, the headers alone."""

    from gateway.limits import Limits
    from gateway.limits.standing import answer_headers
    from gateway.log.record import LogRecord
    from gateway.state import KeyInfo

    prices = {"*": {"input": 1000, "output": 1000}}
    key = KeyInfo(id=3, name="capped", allowed_models=(), rate_limit_per_minute=None, daily_token_limit=None,
                  usd_budgets=(("5h", 10**12), ("day", 10**12), ("week", 10**12), ("month", 10**12)))
    record = LogRecord(request_id="r", client_protocol="anthropic", status=200, model_sent="m",
                       input_tokens=1200, output_tokens=300)

    async def nothing_logged(*_: Any) -> dict[int, int]:
        return {}

    async def per_request(write_headers: bool) -> float:
        limits = Limits()
        limits.usage.since = nothing_logged  # type: ignore[method-assign]

        async def one(i: int) -> None:
            hold = await limits.admit(key, f"r{i}", lambda budget: 1500, prices)
            if write_headers:
                answer_headers(hold.standings)
            hold.settle(record)
            for _ in range(3):
                await asyncio.sleep(0)

        for i in range(200):
            await one(i)
        t0 = time.perf_counter()
        for i in range(rounds):
            await one(i)
        took = time.perf_counter() - t0
        await limits.aclose()
        return took / rounds * 1e6

    async def both() -> tuple[float, float, float]:
        limits = Limits()
        limits.usage.since = nothing_logged  # type: ignore[method-assign]
        hold = await limits.admit(key, "x", lambda budget: 1500, prices)
        t0 = time.perf_counter()
        for _ in range(rounds):
            answer_headers(hold.standings)
        alone = (time.perf_counter() - t0) / rounds * 1e6
        hold.settle()
        await limits.aclose()
        # Interleaved halves: the machine's load moves both alike.
        without, with_ = [], []
        for _ in range(2):
            without.append(await per_request(False))
            with_.append(await per_request(True))
        return alone, min(without), min(with_)

    alone, without, with_ = asyncio.run(both())
    return {"headers_alone_us": round(alone, 2), "admit_and_settle_us": round(without, 2),
            "admit_settle_and_headers_us": round(with_, 2), "added_us": round(max(with_ - without, 0.0), 2)}
def config_check_us(rounds: int) -> dict[str, float]:
    """The configuration cache's ``get`` per request on SQLite, with the per-request read of the
    configuration's version (``gateway.configwatch.SqliteVersion``, a WAL file) against none."""

    import sqlite3

    from accounts import configversion
    from accounts.db import LoopSqlite
    from gateway.configwatch import SqliteVersion
    from gateway.state import Snapshot, SnapshotCache

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "version.sqlite3")
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"CREATE TABLE {configversion.TABLE} (id integer PRIMARY KEY, version bigint NOT NULL)")
        db.execute(f"INSERT INTO {configversion.TABLE} VALUES (1, 7)")
        snap = Snapshot(version=7)

        async def per_get(cache: SnapshotCache) -> float:
            for _ in range(200):
                await cache.get()
            t0 = time.perf_counter()
            for _ in range(rounds):
                await cache.get()
            return (time.perf_counter() - t0) / rounds * 1e6

        async def both() -> tuple[float, float]:
            plain = await per_get(SnapshotCache(3600.0, load=lambda: snap))
            watched = await per_get(SnapshotCache(3600.0, load=lambda: snap, watch=SqliteVersion(LoopSqlite(path))))
            return plain, watched

        plain, watched = asyncio.run(both())
        db.close()
    return {"get_without_version_check_us": round(plain, 2), "get_with_version_check_us": round(watched, 2),
            "added_us": round(watched - plain, 2)}


def buckets_us(rounds: int, batch_size: int = 50) -> dict[str, float]:
    """Per logged request, the usage and spend bucket sinks in one tier and in all three (medians of five
    interleaved slices; SQLite in memory, batches of ``batch_size`` as the writer hands them over)."""

    import datetime as dt
    import random
    import statistics
    from decimal import Decimal

    from django.core.management import call_command
    from django.db import transaction

    from dashboard import rollup, spend

    call_command("migrate", verbosity=0)
    rng = random.Random(3)
    now = dt.datetime.now(dt.timezone.utc)
    usage, spent = [], []
    for i in range(batch_size):  # a batch is the last moment's requests: one bucket per tier, many accounts
        account = rng.randrange(1, 501)
        usage.append(rollup.Row(created_at=now, account_id=account, status=200, error_class="", latency_ms=900,
                                ttfb_ms=200, input_tokens=1200, output_tokens=300, cached_tokens=0,
                                reasoning_tokens=0, attempts=[{"account_id": account, "verdict": "ok"}]))
        spent.append(SimpleNamespace(created_at=now, client_key_id=rng.randrange(1, 51), provider_id=account % 5,
                                     model_requested=f"model-{i % 4}", status=200, error_class="",
                                     input_tokens=1200, output_tokens=300, cached_tokens=0, reasoning_tokens=0,
                                     cost=Decimal("0.0009")))

    def per_row(usage_tiers: Any, spend_tiers: Any, batches: int) -> float:
        t0 = time.perf_counter()
        for _ in range(batches):
            with transaction.atomic():
                rollup.add(usage, usage_tiers)
                spend.add(spent, spend_tiers)
        return (time.perf_counter() - t0) / (batches * batch_size) * 1e6

    batches = max(1, rounds // batch_size // 5)
    one, three = [], []
    for _ in range(5):
        one.append(per_row(rollup.TIERS[:1], spend.TIERS[:1], batches))
        three.append(per_row(rollup.TIERS, spend.TIERS, batches))
    return {"five_minute_tier_only_us": round(statistics.median(one), 2),
            "three_tiers_us": round(statistics.median(three), 2)}


def at_rest_us(rounds: int) -> dict[str, float]:
    """A stored answer encrypted when kept and decrypted when read back (``atrest``: Fernet), per answer
    of 4 KB and of 64 KB of JSON; on the Responses path with ``store`` (the default), and per logged body."""

    import atrest

    out = {}
    for size in (4, 64):
        text = '{"output": [{"type": "message", "content": "' + "x" * (size * 1024 - 40) + '"}]}'
        n = max(200, rounds // (size * 4))
        t0 = time.perf_counter()
        for _ in range(n):
            atrest.unseal(atrest.seal(text))
        out[f"seal_and_unseal_{size}kb_us"] = round((time.perf_counter() - t0) / n * 1e6, 2)
    return out


def measure(rounds: int = ROUNDS) -> dict[str, Any]:
    configure()
    out = {"rounds": rounds, "metrics_us_per_request": round(metrics_us(rounds), 2), "limits": limits_us(rounds),
           "usage_headers": usage_headers_us(rounds), "log_writer_buckets": buckets_us(rounds),
           "at_rest": at_rest_us(rounds), "config_check": config_check_us(rounds)}
    print(f"  encrypted at rest: a stored answer sealed and opened, {out['at_rest']['seal_and_unseal_4kb_us']} µs "
          f"(4 KB), {out['at_rest']['seal_and_unseal_64kb_us']} µs (64 KB)", flush=True)
    print(f"  metrics: {out['metrics_us_per_request']} µs a request; limits: a key with a rate limit, a token "
          f"limit and four USD budgets {out['limits']['key_with_limits_and_usd_budgets_us']} µs against "
          f"{out['limits']['key_without_limits_us']} µs for a key with none", flush=True)
    u = out["usage_headers"]
    print(f"  usage-limit headers of a capped key's answer: {u['headers_alone_us']} µs to write; admitted with "
          f"them {u['admit_settle_and_headers_us']} µs against {u['admit_and_settle_us']} µs", flush=True)
    c = out["config_check"]
    print(f"  configuration: {c['get_with_version_check_us']} µs a request with the SQLite version check, "
          f"{c['get_without_version_check_us']} µs without (PostgreSQL: one query each "
          f"GATEWAY_CONFIG_CHECK_SECONDS, not per request)", flush=True)
    b = out["log_writer_buckets"]
    print(f"  log writer's usage and spend buckets: {b['three_tiers_us']} µs a logged request in three tiers, "
          f"{b['five_minute_tier_only_us']} µs in the five-minute tier alone", flush=True)
    return out


def run(quick: bool = False) -> dict[str, Any]:
    """For ``python -m bench``: the measurement in a child process, its figures returned."""

    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        args = [sys.executable, "-m", "bench.features", "--json", out.name]
        args += ["--rounds", "5000"] if quick else []
        subprocess.run(args, cwd=ROOT, check=True, timeout=600)
        return dict(json.loads(Path(out.name).read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.features", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    result = measure(args.rounds)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
