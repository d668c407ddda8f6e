"""Fault soak: concurrent clients on all three protocols against an upstream that misbehaves often.

The pool mixes good accounts with accounts that answer 429/401/402/403/500 or
fail inside the stream; one provider points at a closed port; the models ask
the scripted upstream for mid-stream disconnects, stalls past the idle timeout,
truncated streams and malformed SSE. About a third of upstream responses are
faults. Afterwards the figures say whether anything was lost or leaked: hung
clients, streams the official SDKs cannot parse or that lack their terminator,
request-log rows missing or doubled, accounts disabled twice at once, resident
memory of the gateway, upstream sockets left open, secrets seen anywhere.

``python -m tests.hardening.soak`` (``make soak``) runs it standalone on a
scratch SQLite database with its own scripted upstream and gateway; the CI test
(``test_soak.py``) drives the same code against the test database.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.hardening.soak_audit import (disable_figures, log_figures, log_file_text, rendered_pages, rss_kb,
                                        secret_findings, stored_texts, upstream_sockets, wait_for_rows)
from tests.hardening.soak_load import Pool, Tally, drive, soak_pool
from tests.servers import ROOT, Server

@dataclass
class Report:
    figures: dict[str, Any]
    problems: list[str]

    def print(self, out: Any = sys.stdout) -> None:
        for name, value in self.figures.items():
            print(f"  {name:28} {value}", file=out)
        for problem in self.problems:
            print(f"  ! {problem}", file=out)

    def failures(self) -> list[str]:
        f = self.figures
        checks = {
            "hung clients": f["hung_clients"] == 0,
            "broken connections": f["broken_connections"] == 0,
            "malformed streams": f["malformed_answers"] == 0,
            "wrong content": f["wrong_content"] == 0,
            "lost rows": f["lost_rows"] == 0 and f["duplicate_rows"] == 0,
            "double disables": f["double_disables"] == 0 and not f["wrong_disables"],
            "bad accounts disabled": f["bad_accounts_disabled"] == f["bad_accounts"],
            "memory": f["rss_after_kb"] <= f["rss_before_kb"] * 1.10,
            "upstream sockets": (f["sockets_close_wait"] == 0 and f["sockets_unread"] == 0
                                 and f["sockets_established"] <= f["clients"]
                                 and f["mock_streams_open"] == 0),
            "secrets": f["secret_findings"] == 0,
            "fault share": 0.2 <= f["fault_share"] <= 0.45,
        }
        return [name for name, ok in checks.items() if not ok]


def run(gateway: Server, mock: Server, pool: Pool, *, clients: int, seconds: float, warmup: float,
        seed: int = 7, idle_expiry: float = 0.0) -> Report:
    """Warm up, measure, soak, settle, measure again; the pool must already be loaded."""

    rng = random.Random(seed)
    tally = Tally()
    httpx.post(mock.url + "/_mock/reset")
    pid = gateway.proc.pid
    asyncio.run(drive(gateway.url, pool.client_key, clients, warmup, rng, tally, pool.secrets, pid))
    settle(mock)
    rss_before = rss_kb(pid)
    warmup_requests = tally.sent
    tally.timeline.clear()
    started = time.monotonic()
    asyncio.run(drive(gateway.url, pool.client_key, clients, seconds, rng, tally, pool.secrets, pid))
    soak_seconds = time.monotonic() - started
    settle(mock)
    rows = wait_for_rows(pool.client_key_name, tally.sent)
    time.sleep(1.0)
    rss_after = rss_kb(pid)
    sockets = upstream_sockets(pid, mock.port)
    if idle_expiry:
        time.sleep(idle_expiry)  # past the pool's keep-alive expiry every idle connection is gone
        sockets["established_after_expiry"] = upstream_sockets(pid, mock.port)["established"]
    tally.judge_answers(pool.secrets)
    log = log_figures(pool.client_key_name)
    disables = disable_figures(pool.providers)
    findings = secret_findings(pool.secrets, [*log_file_text(gateway), *stored_texts(pool.providers),
                                              *rendered_pages(pool.providers)])
    figures: dict[str, Any] = {
        "clients": clients, "soak_seconds": round(soak_seconds, 1), "warmup_requests": warmup_requests,
        "requests_sent": tally.sent,  # warm-up included: every one of them must have its row too
        "requests_served": sum(tally.statuses.values()),
        "statuses": dict(sorted(tally.statuses.items())), "streams": tally.streams,
        "upstream_attempts": log["upstream_attempts"], "faults_injected": log["faults_injected"],
        "fault_share": round(log["faults_injected"] / max(1, log["upstream_attempts"]), 3),
        "faults_by_kind": log["faults_by_kind"],
        "hung_clients": tally.hung, "broken_connections": tally.broken, "malformed_answers": tally.malformed,
        "wrong_content": tally.wrong_content, "log_rows": rows, "lost_rows": max(0, tally.sent - rows),
        "duplicate_rows": log["rows"] - log["distinct_request_ids"] + max(0, rows - tally.sent),
        "disable_events": disables["disable_events"], "double_disables": disables["double_disables"],
        "bad_accounts_disabled": disables["bad_accounts_disabled"], "bad_accounts": disables["bad_accounts"],
        "wrong_disables": disables["wrong_disables"],
        "rss_before_kb": rss_before, "rss_after_kb": rss_after,
        "rss_change": f"{(rss_after - rss_before) / rss_before:+.1%}",
        "sockets_established": sockets["established"], "sockets_close_wait": sockets["close_wait"],
        "sockets_unread": sockets["unread"],
        "mock_streams_open": httpx.get(mock.url + "/_mock/stats").json()["streams_open"],
        "secret_findings": len(findings) + tally.leaked,
        "cancelled_rows": log["cancelled_rows"],
        "timeline_10s": tally.timeline,
    }
    if "established_after_expiry" in sockets:
        figures["sockets_after_keepalive_expiry"] = sockets["established_after_expiry"]
    return Report(figures, tally.problems + findings[:20])


def settle(mock: Server, timeout: float = 15.0) -> None:
    """Wait until the upstream has no stream open (the gateway let go of all of them)."""

    deadline = time.monotonic() + timeout
    while httpx.get(mock.url + "/_mock/stats").json()["streams_open"] and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)


# DEBUG off as in production: with it on, Django keeps the last 9,000 SQL queries of every database
# connection (one per worker thread), which reads as 50+ MB of "growth" in a soak.
# The stored answers' cache is bounded (8 MiB by default; tests/conversations reads its bound) and at
# ~500 requests a second fills for a minute, past the warm-up: a small one is full before the
# memory is first read, so what grows after it is what the soak is after.
GATEWAY_ENV = {"GATEWAY_MAX_ATTEMPTS": "4", "GATEWAY_KEEPALIVE_SECONDS": "1", "LOG_LEVEL": "INFO", "DEBUG": "0",
               "GATEWAY_RESPONSES_CACHE_MB": "0.5"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=180.0, help="length of the soak after the warm-up")
    parser.add_argument("--warmup", type=float, default=20.0)
    parser.add_argument("--idle-expiry", type=float, default=65.0,
                        help="then wait this long and count upstream sockets again (0: skip)")
    parser.add_argument("--database-url", default="", help="default: a scratch SQLite file")
    args = parser.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="soak-"))
    db_url = args.database_url or f"sqlite:///{scratch / 'soak.sqlite3'}"
    os.environ["DATABASE_URL"] = db_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django_settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.test.utils import setup_test_environment

    from accounts.config_file import load
    from tests.servers import start_gateway, start_mock

    setup_test_environment()  # the staff pages are rendered by Django's test client
    call_command("migrate", verbosity=0)
    (ROOT / "artifacts").mkdir(exist_ok=True)
    mock = start_mock()
    gateway = None
    try:
        pool = soak_pool(mock.url)
        load(pool.config)
        gateway = start_gateway(db_url, GATEWAY_ENV)
        print(f"soak: {args.clients} clients, {args.warmup:.0f} s warm-up + {args.seconds:.0f} s, "
              f"gateway pid {gateway.proc.pid}, database {db_url}", flush=True)
        report = run(gateway, mock, pool, clients=args.clients, seconds=args.seconds, warmup=args.warmup,
                     idle_expiry=args.idle_expiry)
    finally:
        if gateway is not None:
            gateway.stop()
        mock.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    report.print()
    failures = report.failures()
    if args.idle_expiry and report.figures.get("sockets_after_keepalive_expiry", 0):
        failures.append("upstream sockets still open after the keep-alive expiry")
    print("soak: " + ("FAILED: " + ", ".join(failures) if failures else "all checks passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
