"""The benchmark suite stays runnable: its modules import, the translation benchmark runs, and
the load generator's HTTP parsing (which every gateway figure depends on) reads bodies right.

Nothing here asserts on speed: the machine running the tests is not the one that benchmarks.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import http1, loadgen, profile, report, translation
from bench.__main__ import parse
from bench.procs import ROOT
from bench.targets import ROUTES, bench_config, gateway_target

MODULES = ["bench.__main__", "bench.bare_relay", "bench.gateway", "bench.http1", "bench.loadgen", "bench.procs",
           "bench.procstat", "bench.profile", "bench.report", "bench.targets", "bench.translation", "bench.features",
           "bench.dashboard_bench", "bench.agents"]


@pytest.mark.parametrize("name", MODULES)
def test_bench_module_imports(name: str) -> None:
    importlib.import_module(name)


@pytest.mark.parametrize("client,upstream", translation.NAMED_PAIRS)
def test_translation_benchmark_runs_a_tiny_case(client: str, upstream: str) -> None:
    result = translation.run_case(client, upstream, min_seconds=0.02, deltas=20)
    assert result.streams >= 1
    assert result.deltas == result.streams * 20
    assert result.bytes_in > 0 and result.bytes_out > 0
    assert set(result.as_dict()) >= {"events_per_s", "ratio_to_target", "events_per_cpu_s",
                                     "best_round_events_per_cpu_s"}
    # The fastest round is one of the rounds: never slower than all of them together.
    assert result.best_events_per_cpu_s >= result.events_per_cpu_s * 0.999


def test_translated_stream_ends_with_the_client_protocols_terminator() -> None:
    chunks = translation.upstream_chunks("openai_chat", deltas=5)
    assert chunks[-1] == b"data: [DONE]\n\n"


class _FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closing = False

    def write(self, data: bytes) -> None:  # type: ignore[override]
        self.written += data

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True


def _replay(response: bytes, cut: int, track: bool) -> http1.Reply:
    """Feed ``response`` to a connection in pieces of ``cut`` bytes; return its reply."""

    async def go() -> http1.Reply:
        conn = http1.Conn()
        conn.connection_made(_FakeTransport())
        pending = asyncio.ensure_future(conn.request(b"GET / HTTP/1.1\r\n\r\n", track))
        await asyncio.sleep(0)
        for i in range(0, len(response), cut):
            conn.data_received(response[i:i + cut])
        return await asyncio.wait_for(pending, 1)

    return asyncio.run(go())


EVENTS = [b'data: {"a": 1}\n\n', b"event: message_stop\ndata: {}\n\n"]
CHUNKED_SSE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
               + b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in EVENTS) + b"0\r\n\r\n")


@pytest.mark.parametrize("cut", [1, 2, 3, 7, 64, 4096])
def test_loadgen_reads_a_chunked_stream_in_any_cutting(cut: int) -> None:
    reply = _replay(CHUNKED_SSE, cut, track=True)
    assert reply.status == 200
    assert reply.body_bytes == sum(map(len, EVENTS))
    assert reply.last_event == b"event: message_stop\ndata: {}"
    assert reply.first_data_at > 0


def test_loadgen_fails_a_malformed_chunk_size_instead_of_crashing() -> None:
    bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
    with pytest.raises(http1.HttpError):
        _replay(bad, 4096, track=True)


@pytest.mark.parametrize("cut", [1, 5, 4096])
def test_loadgen_reads_a_content_length_body(cut: int) -> None:
    reply = _replay(b"HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\n\r\nnope!", cut, track=False)
    assert reply.status == 404
    assert reply.body_bytes == 5


def test_loadgen_flags_a_stream_without_its_terminator() -> None:
    target = loadgen.Target("t", "127.0.0.1", 1, b"", terminator=b"[DONE]")
    assert loadgen._check(target, http1.Reply(status=200, last_event=b"data: [DONE]")) is None
    assert loadgen._check(target, http1.Reply(status=200, last_event=b"data: {}")) == "no terminator"
    assert loadgen._check(target, http1.Reply(status=503)) == "HTTP 503"


def test_loadgen_refuses_addresses_off_loopback() -> None:
    with pytest.raises(ValueError):
        loadgen.Target.from_json({"name": "x", "host": "10.0.0.1", "port": 80, "request": ""})


def test_percentiles_in_milliseconds() -> None:
    p = loadgen.percentiles([i / 1000 for i in range(1, 101)])
    assert (p["n"], p["p50"], p["p99"], p["max"]) == (100, 51.0, 100.0, 100.0)


def test_gateway_requests_name_a_configured_provider() -> None:
    config = bench_config("http://127.0.0.1:9")
    for route in ROUTES:
        model = gateway_target(route, 8000, "mock-text", False)["request"].split('"model":"')[1].split("/")[0]
        assert f'name = "{model}"' in config


def test_profile_summary_counts_self_time_at_the_leaf() -> None:
    collapsed = (f"main (/x/site-packages/daphne/server.py:1);view ({ROOT}/gateway/views.py:9) 30\n"
                 "main (/x/site-packages/daphne/server.py:1);dumps (/x/site-packages/orjson/__init__.py:2) 10\n")
    summary = profile.summarise(collapsed)
    assert summary["samples"] == 40
    assert summary["top_self"][0] == {"frame": "view (gateway/views.py)", "samples": 30, "pct": 75.0}
    assert {row["frame"]: row["samples"] for row in summary["self_by_package"]} == {"gateway": 30, "orjson": 10}


def test_profile_summary_shares_the_request_logs_work_between_its_thread_and_the_request_path() -> None:
    collapsed = (f"run (threading.py:1);LogWriter._run ({ROOT}/gateway/log/writer.py:140);_write (w.py:1) 6\n"
                 f"main (s.py:1);finish ({ROOT}/gateway/exchange/finish.py:9);"
                 f"LogWriter.submit ({ROOT}/gateway/log/writer.py:107) 2\n"
                 f"main (s.py:1);view ({ROOT}/gateway/views.py:9) 92\n")
    shares = profile.summarise(collapsed)["request_log_pct"]
    assert shares == {"request-log writer thread": 6.0, "request-log submit, on the request path": 2.0}


def test_stored_responses_cost_is_judged_against_store_false_at_its_worst() -> None:
    rows = report.targets({"gateway": {"passthrough": {"routes": {
        "responses→responses stored json": {"of_bare_relay": 0.5, "cpu_of_unstored": 1.1},
        "responses→responses stored json c=64": {"of_bare_relay": 0.4, "cpu_of_unstored": 1.3},
        "responses→responses json": {"of_bare_relay": 0.6}}}}})
    cost = next(r for r in rows if "over store: false" in r["target"])
    assert (cost["value"], cost["limit"], cost["met"]) == (1.3, 1.25, False)


def test_targets_report_unmet_and_met() -> None:
    rows = report.targets({"gateway": {"multiproc": {"ratio": 1.2}}})
    assert rows == [{"target": "two processes on PostgreSQL vs one (c=64)", "value": 1.2, "limit": 1.8,
                     "unit": "×", "higher_is_better": True, "met": False}]


def test_only_accepts_known_names_and_expands_gateway() -> None:
    assert parse(["--only", "translation,hold"]).names == ["translation", "hold"]
    assert "multiproc" in parse(["--only", "gateway"]).names
    with pytest.raises(SystemExit):
        parse(["--only", "nope"])


def test_features_bench_measures_metrics_limits_and_buckets_per_request(tmp_path: Path) -> None:
    out = tmp_path / "features.json"
    subprocess.run([sys.executable, "-m", "bench.features", "--rounds", "300", "--json", str(out)], cwd=ROOT,
                   check=True, timeout=120, capture_output=True)
    figures = json.loads(out.read_text())
    assert 0 < figures["metrics_us_per_request"] < 10_000
    limits = figures["limits"]
    assert 0 < limits["key_without_limits_us"] < limits["key_with_limits_and_usd_budgets_us"]
    headers = figures["usage_headers"]
    assert 0 < headers["headers_alone_us"] < headers["admit_settle_and_headers_us"]
    buckets = figures["log_writer_buckets"]
    assert 0 < buckets["five_minute_tier_only_us"] < buckets["three_tiers_us"]


@pytest.mark.slow  # seeds 500 accounts and renders every page: ~20 s
def test_dashboard_bench_renders_every_dashboard_and_admin_page_on_a_seeded_pool(tmp_path: Path) -> None:
    out = tmp_path / "dashboard.json"
    subprocess.run([sys.executable, "-m", "bench.dashboard_bench", "--rows", "3000", "--repeats", "1",
                    "--json", str(out)], cwd=ROOT, check=True, timeout=300, capture_output=True)
    figures = json.loads(out.read_text())
    pages = {p["page"] for p in figures["pages"]}
    assert {"accounts 7d", "client keys 7d", "spend 7d", "admin accounts", "admin request log"} <= pages
    assert figures["rows"] == 3000 and all(p["median_ms"] > 0 for p in figures["pages"])


def test_agents_bench_measures_memory_per_session_and_the_cost_of_affinity_and_quota(tmp_path: Path) -> None:
    out = tmp_path / "agents-overhead.json"
    subprocess.run([sys.executable, "-m", "bench.agents", "--overhead", "--rounds", "300", "--json", str(out)],
                   cwd=ROOT, check=True, timeout=300, capture_output=True)
    figures = json.loads(out.read_text())
    assert 50 < figures["bytes_per_tracked_session"] < 2000
    assert figures["session_identity_us"] > 0 and figures["rate_limit_headers_us"] > 0
    assert figures["added_us_per_request"] == pytest.approx(
        figures["session_identity_us"] + figures["selector_us"], abs=0.05)


@pytest.mark.slow  # three runs of the gateway over 60 rate-limited accounts: about a minute
def test_agents_bench_runs_and_the_new_selection_meets_fewer_429s_than_todays(tmp_path: Path) -> None:
    out = tmp_path / "agents.json"
    subprocess.run([sys.executable, "-m", "bench.agents", "--quick", "--json", str(out)], cwd=ROOT, check=True,
                   timeout=900, capture_output=True)
    figures = json.loads(out.read_text())
    today, new = figures["today"], figures["new"]
    assert today["upstream_429s"] > 0, "the pool's limits are to be tight enough for blind selection to meet 429s"
    assert new["upstream_429s"] < today["upstream_429s"] and new["client_errors"] == 0
    assert set(new["kinds"]) == {"claude", "codex", "chat"}
    assert new["busiest_over_fair_share"] > 0
    assert report.targets({"agents": figures})
