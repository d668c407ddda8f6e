"""Dashboard pages on a big request log: ``python -m bench.dashboard_bench [--rows N] [--pg] [--json PATH]``.

Seeds a scratch database (SQLite in a temp dir; ``--pg``: a scratch PostgreSQL
database ``bench_dashboard`` on 127.0.0.1:5432) with a pool of 500 accounts and
50 client keys, 10,000,000 request-log rows over 30 days, their usage and spend
buckets (through ``dashboard.rollup.add`` and ``dashboard.spend.add``, the log
writer's own sinks) and a few thousand disable events, then renders every
dashboard and admin page with Django's test client as a superuser and prints
the median and worst time of each. The target is < 300 ms per page.

``run(quick)`` runs it in a child process (Django is configured per process)
and returns the figures, for ``python -m bench``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 300.0
PG_URL = "postgres://postgres@127.0.0.1:5432/"
PG_DB = "bench_dashboard"
DAYS = 30
CHUNK = 20_000


def configure(db_url: str) -> None:
    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "gateway.settings", "DATABASE_URL": db_url, "DEBUG": "0",
        "SECRET_KEY": "bench-only-secret-key", "ALLOWED_HOSTS": "testserver,127.0.0.1", "LOG_LEVEL": "WARNING",
    })
    os.environ.pop("REDIS_URL", None)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def scratch_pg(keep: bool = False) -> tuple[str, bool]:
    """The scratch database's URL, and whether it holds an earlier run's seeding (``keep``: reuse it if so)."""

    import psycopg

    with psycopg.connect(PG_URL + "postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [PG_DB]).fetchone() is not None
        if keep and exists:
            return PG_URL + PG_DB, True
        conn.execute(f"DROP DATABASE IF EXISTS {PG_DB}")
        conn.execute(f"CREATE DATABASE {PG_DB}")
    return PG_URL + PG_DB, False


# ------------------------------------------------------------------ seeding

MODELS = [f"model-{i}" for i in range(12)] + ["rare-model"]
MODEL_WEIGHTS = [30, 20, 12, 9, 7, 6, 5, 4, 3, 2, 1, 1, 0.01]
PROTOCOLS = ["openai_chat", "anthropic", "responses"]


ACCOUNTS = 500
KEYS = 50
PRICE = {"input": Decimal("0.25"), "output": Decimal("2")}  # USD per million tokens, every model


def seed_pool() -> dict[str, Any]:
    from accounts.models import Account, ApiKey, ModelAlias, Provider

    rng = random.Random(5)
    providers, accounts = [], []
    for proto in PROTOCOLS:
        p = Provider.objects.create(name=f"bench-{proto}", protocol=proto, base_url="http://127.0.0.1:9/v1",
                                    prices={"*": {k: str(v) for k, v in PRICE.items()}})
        providers.append(p)
        ModelAlias.objects.create(name=f"{proto}-*", provider=p, upstream_model="*")
    for i in range(ACCOUNTS):
        p = providers[i % len(providers)]
        a = Account(provider=p, label=f"acct-{i:03d}", status=rng.choice(["active"] * 6 + ["cooling", "disabled"]),
                    balance=Decimal(rng.randrange(0, 50_000)) / 100)
        a.set_secret(f"sk-bench-{p.protocol}-{i}-0000000000")
        accounts.append(a)
    Account.objects.bulk_create(accounts, batch_size=500)
    accounts = list(Account.objects.select_related("provider").order_by("id"))
    keys = []
    for i in range(KEYS):
        k = ApiKey(name=f"team-{i:02d}")
        k.set_key(f"gw-bench-{i}-000000000000")
        keys.append(k)
    ApiKey.objects.bulk_create(keys)
    return {"providers": providers, "accounts": accounts, "keys": list(ApiKey.objects.order_by("id"))}


def load_pool() -> dict[str, Any]:
    """The pool an earlier run seeded into a kept database (``--db``)."""

    from accounts.models import Account, ApiKey, Provider

    return {"providers": list(Provider.objects.order_by("id")),
            "accounts": list(Account.objects.select_related("provider").order_by("id")),
            "keys": list(ApiKey.objects.order_by("id"))}


def fake_rows(n: int, pool: dict[str, Any], rng: random.Random) -> Any:
    """(column values, rollup row) for n requests spread over DAYS days up to now, oldest first."""

    from dashboard import rollup

    now = time.time()
    span = DAYS * 86400
    step = span / n
    accounts, keys = pool["accounts"], pool["keys"]
    models = rng.choices(MODELS, MODEL_WEIGHTS, k=n)
    for i in range(n):
        ts = now - span + i * step + rng.random() * step
        created = dt.datetime.fromtimestamp(ts, dt.timezone.utc)
        account = accounts[rng.randrange(len(accounts))]
        key = keys[rng.randrange(len(keys))]
        r = rng.random()
        status, error = ((200, "") if r < 0.93 else (429, "") if r < 0.96 else (502, "upstream_error")
                         if r < 0.98 else (400, "invalid_request"))
        if r > 0.995:
            account = None
        stream = rng.random() < 0.5
        ttfb = int(rng.lognormvariate(6, 0.7)) if status == 200 else None
        latency = (ttfb or 50) + int(rng.expovariate(1 / 800))
        inp, out = rng.randrange(10, 4000), rng.randrange(1, 1500) if status == 200 else 0
        proto = PROTOCOLS[rng.randrange(3)]
        attempts = ([{"account_id": account.pk, "account_label": account.label, "status": status,
                      "verdict": "ok" if status == 200 else "return", "latency_ms": latency, "error": "",
                      "tier": ""}] if account else [])
        values = {
            "created_at": created, "request_id": f"req_{i:012x}{rng.getrandbits(32):08x}",
            "client_key_id": key.pk, "client_key_name": key.name, "client_protocol": proto,
            "upstream_protocol": account.provider.protocol if account else "",
            "provider_id": account.provider_id if account else None, "account_id": account.pk if account else None,
            "model_requested": models[i], "model_sent": models[i], "stream": stream, "status": status,
            "error_class": error, "attempts": attempts, "attempt_count": len(attempts), "latency_ms": latency,
            "ttfb_ms": ttfb, "input_tokens": inp, "output_tokens": out, "cached_tokens": inp // 10,
            "reasoning_tokens": 0, "finish_reason": "stop" if status == 200 else "",
            "cost": (PRICE["input"] * inp + PRICE["output"] * out) / 1_000_000 if status == 200 else None,
        }
        yield values, rollup.Row(created_at=created, account_id=values["account_id"], status=status, error_class=error,
                          latency_ms=latency, ttfb_ms=ttfb, input_tokens=inp, output_tokens=out,
                          cached_tokens=inp // 10, reasoning_tokens=0, attempts=attempts)


def seed_log(n: int, pool: dict[str, Any]) -> float:
    """Bulk-insert n rows and their usage buckets; returns the seconds it took."""

    from django.db import connection, transaction

    from accounts.models import RequestAttempt, RequestLog
    from dashboard import rollup, spend

    started = time.monotonic()
    fields = [f for f in RequestLog._meta.concrete_fields if not f.primary_key]
    columns = [f.column for f in fields]
    defaults = {f.attname: f.get_default() for f in fields}
    pg = connection.vendor == "postgresql"
    table = RequestLog._meta.db_table

    def prep(values: dict[str, Any]) -> tuple[Any, ...]:
        out = []
        for f in fields:
            v = values.get(f.attname, defaults[f.attname])
            if f.attname == "attempts":
                v = json.dumps(v)
            elif not pg and f.attname == "created_at":
                v = v.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat(" ")
            out.append(v)
        return tuple(out)

    attempts = RequestAttempt._meta.db_table
    last_id = [0]
    chunk: list[tuple[Any, ...]] = []
    rows: list[rollup.Row] = []
    spent: list[Any] = []

    def flush() -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            if pg:
                with cursor.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                    for item in chunk:
                        copy.write_row(item)
            else:
                cursor.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
                                   f"({', '.join(['%s'] * len(columns))})", chunk)
            # Each row's attempt as the log writer writes it (RequestAttempt: the account filter's index).
            cursor.execute(f"INSERT INTO {attempts} (request_id, account_id, created_at, verdict, status) "
                           f"SELECT id, account_id, created_at, 'ok', status FROM {table} "
                           f"WHERE id > %s AND account_id IS NOT NULL", [last_id[0]])
            cursor.execute(f"SELECT max(id) FROM {table}")
            last_id[0] = cursor.fetchone()[0] or 0
            rollup.add(rows)
            spend.add(spent)
        chunk.clear()
        rows.clear()
        spent.clear()

    for values, row in fake_rows(n, pool, random.Random(7)):
        chunk.append(prep(values))
        rows.append(row)
        spent.append(SimpleNamespace(**values))
        if len(chunk) >= CHUNK:
            flush()
    if chunk:
        flush()
    if pg:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # what autovacuum would have done on a live database
    return time.monotonic() - started


def seed_events(pool: dict[str, Any], n: int = 3000) -> None:
    from django.utils import timezone

    from accounts.models import DisableEvent

    rng = random.Random(3)
    now = timezone.now()
    DisableEvent.objects.bulk_create([DisableEvent(
        account=rng.choice(pool["accounts"]), created_at=now - dt.timedelta(minutes=rng.randrange(DAYS * 1440)),
        rule="exhausted", tier="tier3_account_exhausted", status_code=429,
        excerpt="Rate limit reached for requests on this account. Please try again in 30s.",
        ended_at=None if rng.random() < 0.1 else now, ended_by="" if rng.random() < 0.1 else "cooldown",
    ) for _ in range(n)], batch_size=1000)


# ------------------------------------------------------------------ timing

def loadavg() -> str:
    """The machine's 1-minute load average: figures taken beside other work are not the page's alone."""

    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def pages(pool: dict[str, Any]) -> list[tuple[str, str]]:
    from accounts.models import RequestLog
    from dashboard.logsearch import encode_cursor

    account, provider, key = pool["accounts"][3], pool["providers"][1], pool["keys"][2]
    newest = RequestLog.objects.order_by("-created_at", "-id").only("id", "created_at")
    total = RequestLog.objects.count()
    middle = newest[total // 2]
    page2 = newest[50]
    ten_days = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=10))
    detail = newest[total // 3]
    return [
        ("overview 1h", "/dashboard/?window=1h"),
        ("overview 24h", "/dashboard/?window=24h"),
        ("overview 7d", "/dashboard/?window=7d"),
        ("accounts 24h", "/dashboard/usage/?window=24h"),
        ("accounts 7d", "/dashboard/usage/?window=7d"),
        ("account detail 24h", f"/dashboard/accounts/{account.pk}/?window=24h"),
        ("account detail 7d", f"/dashboard/accounts/{account.pk}/?window=7d"),
        ("disable events", "/dashboard/events/"),
        ("disable events, open", "/dashboard/events/?open=1"),
        ("request log", "/dashboard/requests/"),
        ("request log, page 2", f"/dashboard/requests/?after={encode_cursor(page2)}"),
        ("request log, middle of the log", f"/dashboard/requests/?after={encode_cursor(middle)}"),
        ("filter account", f"/dashboard/requests/?account={account.pk}"),
        ("filter provider", f"/dashboard/requests/?provider={provider.pk}"),
        ("filter client key", f"/dashboard/requests/?client_key={key.pk}"),
        ("filter status 429", "/dashboard/requests/?status=429"),
        ("filter status error", "/dashboard/requests/?status=error"),
        ("filter protocol", "/dashboard/requests/?protocol=anthropic"),
        ("filter streaming", "/dashboard/requests/?stream=yes"),
        ("filter model (common)", "/dashboard/requests/?model=model-0"),
        ("filter model (rare, 0.01%)", "/dashboard/requests/?model=rare-model"),
        ("filter model (no match)", "/dashboard/requests/?model=no-such-model"),
        ("filter one day, 10 days ago", "/dashboard/requests/?since=" + f"{ten_days - dt.timedelta(days=1):%Y-%m-%dT%H:%M}"
         + "&until=" + f"{ten_days:%Y-%m-%dT%H:%M}"),
        ("filter account + 5xx", f"/dashboard/requests/?account={account.pk}&status=5xx"),
        ("filter account by part of its name", f"/dashboard/requests/?account={account.provider.name[6:]}/{account.label}"),
        ("filter error class (2%)", "/dashboard/requests/?error=upstream_error"),
        ("filter error class (none)", "/dashboard/requests/?error=upstream_timeout"),
        ("filter account, page 2", f"/dashboard/requests/?account={account.pk}&after={encode_cursor(page2)}"),
        ("request detail", f"/dashboard/requests/{detail.request_id}/"),
        ("client keys 24h", "/dashboard/keys/?window=24h"),
        ("client keys 7d", "/dashboard/keys/?window=7d"),
        ("client key detail 7d", f"/dashboard/keys/{key.pk}/?window=7d"),
        ("spend 7d", "/dashboard/spend/?window=7d"),
        ("spend CSV 7d", "/dashboard/spend.csv?window=7d"),
        ("admin index", "/admin/"),
        ("admin providers", "/admin/accounts/provider/"),
        ("admin accounts", "/admin/accounts/account/"),
        ("admin accounts, page 5", "/admin/accounts/account/?p=5"),
        ("admin accounts, disabled", "/admin/accounts/account/?status__exact=disabled"),
        ("admin accounts, search", "/admin/accounts/account/?q=acct-4"),
        ("admin account change", f"/admin/accounts/account/{account.pk}/change/"),
        ("admin client keys", "/admin/accounts/apikey/"),
        ("admin client key change", f"/admin/accounts/apikey/{key.pk}/change/"),
        ("admin model aliases", "/admin/accounts/modelalias/"),
        ("admin disable events", "/admin/accounts/disableevent/"),
        ("admin request log", "/admin/accounts/requestlog/"),
        ("admin request log, 429", "/admin/accounts/requestlog/?status__exact=429"),
        ("admin request log, account attempted", f"/admin/accounts/requestlog/?attempted_account={account.pk}"),
        ("admin request log, search id", f"/admin/accounts/requestlog/?q={detail.request_id}"),
        ("admin request log row", f"/admin/accounts/requestlog/{detail.pk}/change/"),
        ("admin webhooks", "/admin/alerts/webhook/"),
        ("admin alert deliveries", "/admin/alerts/delivery/"),
    ]


def time_pages(pool: dict[str, Any], repeats: int) -> list[dict[str, Any]]:
    from django.contrib.auth.models import User
    from django.test import Client

    client = Client()
    user = User.objects.filter(username="bench").first() or User.objects.create_superuser("bench", password="x")
    client.force_login(user)
    results = []
    for name, url in pages(pool):
        response = client.get(url)  # warm-up: template compilation, caches
        assert response.status_code == 200, (url, response.status_code)
        times, cpu = [], []
        for _ in range(repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            response = client.get(url)
            times.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
            assert response.status_code == 200
        med = statistics.median(times)
        results.append({"page": name, "url": url, "median_ms": round(med, 1), "max_ms": round(max(times), 1),
                        "cpu_median_ms": round(statistics.median(cpu), 1), "under_target": max(times) < TARGET_MS})
        # CPU time of this process (the page, and on SQLite the queries too) is what other load
        # on the machine cannot inflate; wall-clock is what a user waits.
        print(f"  {name:34s} median {med:7.1f} ms   worst {max(times):7.1f} ms   cpu {statistics.median(cpu):6.1f} ms"
              f"{'' if max(times) < TARGET_MS else '   OVER ' + str(int(TARGET_MS)) + ' ms'}", flush=True)
    return results


# Indexes this benchmark shows the log needs but the schema does not have yet (proposed to the
# maintainers of accounts/models.py); --proposed-indexes adds them to the scratch database.
PROPOSED_INDEXES = {"requestlog_model_created": ("model_requested", "created_at")}


def add_proposed_indexes() -> None:
    from django.db import connection

    from accounts.models import RequestLog

    with connection.cursor() as cursor:
        for name, cols in PROPOSED_INDEXES.items():
            cursor.execute(f"CREATE INDEX {name} ON {RequestLog._meta.db_table} ({', '.join(cols)})")


def measure(rows: int, use_pg: bool, repeats: int, proposed: bool = False, db: str = "") -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="dashboard-bench-") as tmp:
        if use_pg:
            db_url, reuse = scratch_pg(keep=bool(db))
        else:
            db_url, reuse = f"sqlite:///{db or f'{tmp}/bench.sqlite3'}", bool(db) and Path(db).exists()
        configure(db_url)
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0)  # on a kept database: the migrations since it was seeded
        if reuse:
            pool, seconds = load_pool(), 0.0
            print(f"dashboard bench: reusing {PG_DB if use_pg else db} (its rows end when it was seeded)", flush=True)
        else:
            pool = seed_pool()
            print(f"dashboard bench: seeding {rows:,} request-log rows into {connection.vendor}…", flush=True)
            seconds = seed_log(rows, pool)
            seed_events(pool)
        if proposed:
            add_proposed_indexes()
            print(f"  with the proposed indexes: {', '.join(map(str, PROPOSED_INDEXES.values()))}", flush=True)
        print(f"  seeded in {seconds:.0f} s; timing each page ({repeats} runs after a warm-up); "
              f"load average {loadavg()}:", flush=True)
        results = time_pages(pool, repeats)
        connection.close()
    worst = max(r["max_ms"] for r in results)
    print(f"dashboard bench: slowest page {worst:.0f} ms; "
          f"{sum(r['under_target'] for r in results)}/{len(results)} pages under {TARGET_MS:.0f} ms", flush=True)
    return {"database": "postgresql" if use_pg else "sqlite", "rows": rows, "seed_seconds": round(seconds, 1),
            "proposed_indexes": proposed, "loadavg_after": loadavg(),
            "target_ms": TARGET_MS, "pages": results, "worst_ms": worst}


def run(quick: bool = False, use_pg: bool = False) -> dict[str, Any]:
    """For ``python -m bench``: the measurement in a child process, its figures returned."""

    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        args = [sys.executable, "-m", "bench.dashboard_bench", "--json", out.name]
        args += ["--rows", "100000"] if quick else []  # the full run: the default, 10,000,000
        args += ["--pg"] if use_pg else []
        subprocess.run(args, cwd=ROOT, check=True, timeout=1800)
        return json.loads(Path(out.name).read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dashboard_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--pg", action="store_true", help=f"scratch PostgreSQL database {PG_DB} instead of SQLite")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--proposed-indexes", action="store_true",
                        help="add the indexes proposed for the request log before timing")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--db", default="", help="SQLite file to seed and keep, or to reuse if it exists; with "
                                                 f"--pg any value keeps and reuses the database {PG_DB} "
                                                 "(seeding 10M rows takes 15-30 minutes)")
    args = parser.parse_args(argv)
    result = measure(args.rows, args.pg, args.repeats, args.proposed_indexes, args.db)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
