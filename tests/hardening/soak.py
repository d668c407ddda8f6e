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
scratch SQLite database with its own scripted upstream and Daphne; the CI test
(``test_soak.py``) drives the same code against the test database.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import shutil
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from tests.servers import ROOT, Server, free_port

PROTOCOLS = ("openai_chat", "anthropic", "responses")
PATHS = {"openai_chat": "/v1/chat/completions", "anthropic": "/v1/messages", "responses": "/v1/responses"}
HELLO = "Hello! This is the mock upstream."
FAULT_MODELS = ("mock-disconnect", "mock-truncated", "mock-stall", "mock-malformed")
# Per upstream provider: a key marker and how many accounts carry it ("good" accounts answer normally).
ACCOUNTS = [("good", 13), ("fail-500", 1), ("fail-403-tokens", 1), ("fail-403-cost", 1), ("fail-429", 1),
            ("fail-401", 1), ("fail-402", 1), ("fail-stream-error", 1)]
DISABLING = ("fail-429", "fail-401", "fail-402", "fail-stream-error")  # must be disabled, once at a time
COOLING = ("fail-429", "fail-stream-error")  # a 429 with Retry-After cools down, and may fail again later
NEVER_DISABLED = ("good", "fail-500", "fail-403-tokens", "fail-403-cost")
REQUEST_TIMEOUT = 45.0  # a client still waiting after this is a hung client
RAMP_SECONDS = 2.0  # clients join over this long


# ----------------------------------------------------------------- the pool


@dataclass
class Pool:
    """The soak's configuration: what ``accounts.config_file.load`` takes, and every secret in it."""

    config: dict[str, Any]
    client_key: str
    client_key_name: str
    secrets: list[str]
    providers: list[str]


def soak_pool(mock_url: str, tag: str | None = None) -> Pool:
    tag = tag or uuid.uuid4().hex[:10]
    dead_url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens: connections are refused
    timeouts = {"connect_timeout": 1.0, "first_byte_timeout": 2.0, "idle_timeout": 1.0}
    providers, secrets = [], []
    for proto in PROTOCOLS:
        accounts = []
        for marker, count in ACCOUNTS:
            for i in range(count):
                key = f"sk-{marker}-{tag}-{uuid.uuid4().hex}"
                secrets.append(key)
                accounts.append({"label": f"{marker}-{i}", "api_key": key})
        providers.append({"name": f"soak-{proto}", "protocol": proto, "base_url": f"{mock_url}/v1", "models": [],
                          **timeouts, "accounts": accounts})
    dead_keys = [f"sk-good-{tag}-dead-{uuid.uuid4().hex}" for _ in range(2)]
    secrets += dead_keys
    providers.append({"name": "soak-dead", "protocol": "openai_chat", "base_url": dead_url, "models": [], **timeouts,
                      "accounts": [{"label": f"dead-{i}", "api_key": k} for i, k in enumerate(dead_keys)]})
    client_key = f"gw-soak-{tag}-{uuid.uuid4().hex}"
    secrets.append(client_key)
    name = f"soak-{tag}"
    config = {"providers": providers, "aliases": [], "client_keys": [{"name": name, "key": client_key}]}
    return Pool(config, client_key, name, secrets, [p["name"] for p in providers])


# ----------------------------------------------------------------- the load


@dataclass(frozen=True)
class Job:
    client: str  # the client's protocol
    provider: str
    model: str
    stream: bool

    @property
    def model_name(self) -> str:
        return f"{self.provider}/{self.model}"


def pick_job(rng: random.Random) -> Job:
    client = rng.choice(PROTOCOLS)
    stream = rng.random() < 0.5
    if rng.random() < 0.04:
        return Job(client, "soak-dead", "mock-text", stream)
    provider = f"soak-{rng.choice(PROTOCOLS)}"
    roll = rng.random()
    if stream and roll < 0.2:
        model = FAULT_MODELS[int(roll / 0.05)]
    elif not stream and roll < 0.045:
        model = rng.choice(("mock-disconnect", "mock-truncated", "mock-malformed"))
    elif roll > 0.94:
        model = "mock-reasoning"
    else:
        model = "mock-text"
    return Job(client, provider, model, stream)


def request_for(job: Job, key: str) -> tuple[str, dict[str, str], bytes]:
    msgs = [{"role": "user", "content": "hi"}]
    if job.client == "openai_chat":
        body: dict[str, Any] = {"model": job.model_name, "messages": msgs, "stream": job.stream}
        if job.stream:
            body["stream_options"] = {"include_usage": True}
        headers = {"authorization": f"Bearer {key}"}
    elif job.client == "anthropic":
        body = {"model": job.model_name, "max_tokens": 100, "messages": msgs, "stream": job.stream}
        headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    else:
        body = {"model": job.model_name, "input": "hi", "stream": job.stream}
        headers = {"authorization": f"Bearer {key}"}
    return PATHS[job.client], {**headers, "content-type": "application/json"}, orjson.dumps(body)


@dataclass
class Tally:
    sent: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    streams: int = 0
    hung: int = 0
    broken: int = 0  # the connection to the gateway failed
    malformed: int = 0
    wrong_content: int = 0  # parsed fine but a healthy answer came out different
    leaked: int = 0  # a secret inside a body sent to the client
    problems: list[str] = field(default_factory=list)
    answers: list[tuple[Job, int, str, bytes]] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)

    def judge_answers(self, secrets: list[str]) -> None:
        if not _READERS:
            _READERS.update(_readers())
        for answer in self.answers:
            judge(*answer, self, secrets)
        self.answers.clear()

    def problem(self, kind: str, job: Job, detail: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.problems) < 20:
            self.problems.append(f"{kind}: {job} {detail[:300]}")


def _readers() -> dict[str, tuple[Callable[[bytes], Any], Callable[[dict[str, Any]], Any]]]:
    from tests.translation.anthropic import sdk_readback as anthropic_sdk
    from tests.translation.openai_chat import sdk_readback as chat_sdk
    from tests.translation.responses import sdk_readback as responses_sdk

    return {"openai_chat": (chat_sdk.summary_from_stream, chat_sdk.summary_from_json),
            "anthropic": (anthropic_sdk.summary_from_stream, anthropic_sdk.summary_from_json),
            "responses": (responses_sdk.summary_from_stream, responses_sdk.summary_from_json)}


def terminated(client: str, wire: bytes) -> bool:
    """Does the stream end with its protocol's terminator?"""

    from translation.sse import SSEParser

    parser = SSEParser()
    events = [*parser.feed(wire), *parser.finish()]
    events = [e for e in events if e.data or e.event]  # keepalive comments carry neither
    if not events:
        return False
    last = events[-1]
    if client == "openai_chat":
        return last.data == "[DONE]"
    if client == "anthropic":
        return last.event == "message_stop"
    return last.event in ("response.completed", "response.failed", "response.incomplete")


def judge(job: Job, status: int, ctype: str, wire: bytes, tally: Tally, secrets: Iterable[str]) -> None:
    """Check one finished answer; count what is wrong with it."""

    tally.statuses[status] += 1
    text = wire.decode("utf-8", "replace")
    if any(s in text for s in secrets):
        tally.problem("leaked", job, "a secret in the answer")
    readers = _READERS[job.client]
    if status == 200 and ctype.startswith("text/event-stream"):
        tally.streams += 1
        if not terminated(job.client, wire):
            tally.problem("malformed", job, f"no terminator: {text[-200:]!r}")
            return
        try:
            summary = readers[0](wire)
        except Exception as exc:  # noqa: BLE001 - whatever the SDK's parser raises is the finding
            tally.problem("malformed", job, f"SDK parser: {type(exc).__name__}: {exc}")
            return
        healthy = job.model in ("mock-text", "mock-reasoning")
        if healthy and (summary.error is not None or summary.text != HELLO):
            tally.problem("wrong_content", job, f"{summary}")
        return
    try:
        body = orjson.loads(wire)
    except orjson.JSONDecodeError:
        tally.problem("malformed", job, f"{status} not JSON: {text[:200]!r}")
        return
    if status == 200:
        try:
            summary = readers[1](body)
        except Exception as exc:  # noqa: BLE001
            tally.problem("malformed", job, f"SDK model: {type(exc).__name__}: {exc}")
            return
        if job.model in ("mock-text", "mock-reasoning", "mock-truncated", "mock-malformed") and summary.text != HELLO:
            tally.problem("wrong_content", job, f"{summary}")
        return
    error = body.get("error") if isinstance(body, dict) else None
    if not (isinstance(error, dict) and isinstance(error.get("message"), str)
            and (job.client != "anthropic" or body.get("type") == "error")):
        tally.problem("malformed", job, f"{status} not an error envelope: {text[:200]!r}")


_READERS: dict[str, Any] = {}


async def one_request(http: httpx.AsyncClient, url: str, job: Job, key: str, tally: Tally,
                      secrets: list[str]) -> None:
    path, headers, content = request_for(job, key)
    tally.sent += 1
    chunks: list[bytes] = []
    try:
        async with asyncio.timeout(REQUEST_TIMEOUT):
            async with http.stream("POST", url + path, headers=headers, content=content) as resp:
                async for chunk in resp.aiter_raw():
                    chunks.append(chunk)
    except (TimeoutError, httpx.TimeoutException) as exc:
        tally.problem("hung", job, f"{type(exc).__name__} after {len(b''.join(chunks))} bytes")
        return
    except httpx.HTTPError as exc:
        tally.problem("broken", job, f"{type(exc).__name__}: {exc}")
        return
    # Judged after the run: the SDKs' parsers are slow enough to throttle the load if run in between.
    tally.answers.append((job, resp.status_code, resp.headers.get("content-type", ""), b"".join(chunks)))


async def drive(url: str, key: str, clients: int, seconds: float, rng: random.Random, tally: Tally,
                secrets: list[str], pid: int | None = None) -> None:
    """``clients`` concurrent clients, each sending one request after another for ``seconds``;
    every 10 s the answers so far, the gateway's CPU use and the host's load go into ``tally.timeline``."""

    for name in ("httpx", "httpx2"):  # one INFO line per request and per SDK read-back: noise
        logging.getLogger(name).setLevel(logging.WARNING)
    deadline = time.monotonic() + seconds
    # Each client has its own HTTP client and connection, kept open like an SDK client's: one shared
    # pool of hundreds of connections makes httpcore's bookkeeping the bottleneck (O(connections x
    # requests) per event), and its default 5 s keep-alive expiry churns connections. Clients start
    # over a second or two: bursts of new connections overflow Daphne's listen backlog (50), and the
    # kernel then drops them before the gateway ever sees the request.
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=REQUEST_TIMEOUT * 4)
    timeout = httpx.Timeout(REQUEST_TIMEOUT, connect=10.0)

    async def client(n: int) -> None:
        await asyncio.sleep(n * RAMP_SECONDS / clients)
        # verify=False: loopback http only, and loading the CA bundle 300 times takes seconds.
        async with httpx.AsyncClient(limits=limits, timeout=timeout, verify=False) as http:
            while time.monotonic() < deadline:
                await one_request(http, url, pick_job(rng), key, tally, secrets)

    sampler = asyncio.ensure_future(_sample(tally, pid))
    try:
        await asyncio.gather(*(client(n) for n in range(clients)))
    finally:
        sampler.cancel()


async def _sample(tally: Tally, pid: int | None, every: float = 10.0) -> None:
    """What a reader needs to tell a slow gateway from a starved one."""

    answered, cpu = len(tally.answers), _cpu_seconds(pid)
    while True:
        await asyncio.sleep(every)
        now_answered, now_cpu = len(tally.answers), _cpu_seconds(pid)
        tally.timeline.append(f"{(now_answered - answered) / every:.0f}/s cpu {(now_cpu - cpu) / every:.0%} "
                              f"load {os.getloadavg()[0]:.1f}{_pressure()}")
        answered, cpu = now_answered, now_cpu


def _cpu_seconds(pid: int | None) -> float:
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pressure() -> str:
    """Linux pressure stall figures (share of time some task waited for CPU / IO), when available."""

    out = ""
    for kind in ("cpu", "io"):
        try:
            line = Path(f"/proc/pressure/{kind}").read_text().splitlines()[0]
        except OSError:
            return out
        out += f" {kind}-wait {line.split()[1].split('=')[1]}%"
    return out


# ----------------------------------------------------------------- what the process holds


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def upstream_sockets(pid: int, port: int) -> dict[str, int]:
    """TCP sockets of process ``pid`` to ``port``: established, close_wait (the peer closed, we never
    did: a leak) and unread (established with bytes we never read: an abandoned response)."""

    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    counts = {"established": 0, "close_wait": 0, "unread": 0}
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            parts = line.split()
            if parts[9] not in inodes or int(parts[2].rsplit(":", 1)[1], 16) != port:
                continue
            rx_queue = int(parts[4].split(":")[1], 16)
            if parts[3] == "01":
                counts["established"] += 1
                counts["unread"] += rx_queue > 0
            elif parts[3] == "08":
                counts["close_wait"] += 1
    return counts


# ----------------------------------------------------------------- what the database holds


def log_figures(key_name: str) -> dict[str, int]:
    from accounts.models import RequestLog

    rows = RequestLog.objects.filter(client_key_name=key_name)
    attempts = 0
    kinds: Counter[str] = Counter()
    for stream, model, trace in rows.values_list("stream", "model_requested", "attempts").iterator():
        scenario = model.rsplit("/", 1)[-1]
        for a in trace:
            attempts += 1
            if a["verdict"] != "ok":
                kinds[f"{a['status'] or 'no answer'} {a['verdict']}"] += 1
            elif stream and scenario in FAULT_MODELS:
                kinds[scenario] += 1
    return {"rows": rows.count(), "distinct_request_ids": rows.values("request_id").distinct().count(),
            "cancelled_rows": rows.filter(error_class__in=("cancelled", "client_disconnected")).count(),
            "upstream_attempts": attempts, "faults_injected": sum(kinds.values()),
            "faults_by_kind": dict(kinds.most_common())}


def disable_figures(providers: list[str]) -> dict[str, Any]:
    """Disable events per account: overlapping ones are double disables."""

    from accounts.models import Account, DisableEvent

    events: dict[int, list[Any]] = defaultdict(list)
    for e in DisableEvent.objects.filter(account__provider__name__in=providers).order_by("created_at", "id"):
        events[e.account_id].append(e)
    double = 0
    for evs in events.values():
        for earlier, later in zip(evs, evs[1:]):
            double += earlier.ended_at is None or earlier.ended_at > later.created_at
    wrong: list[str] = []
    disabled_bad = total_bad = 0
    for account in Account.objects.filter(provider__name__in=providers).select_related("provider"):
        marker = account.label.rsplit("-", 1)[0]
        n = len(events.get(account.pk, []))
        if marker in DISABLING:
            total_bad += 1
            disabled_bad += n > 0
            if marker not in COOLING and n > 1:
                wrong.append(f"{account}: {n} disable events for a permanent fault")
        elif n:
            wrong.append(f"{account} ({marker}) was disabled {n} time(s)")
    return {"disable_events": sum(len(v) for v in events.values()), "double_disables": double,
            "bad_accounts_disabled": disabled_bad, "bad_accounts": total_bad, "wrong_disables": wrong}


def wait_for_rows(key_name: str, expected: int, timeout: float = 30.0) -> int:
    from accounts.models import RequestLog

    deadline = time.monotonic() + timeout
    while True:
        n = RequestLog.objects.filter(client_key_name=key_name).count()
        if n >= expected or time.monotonic() > deadline:
            return n
        time.sleep(0.25)


# ----------------------------------------------------------------- secrets


def secret_findings(secrets: list[str], sources: Iterable[tuple[str, str]]) -> list[str]:
    """Where a secret (whole, or its random part) shows up in any of ``(where, text)``."""

    needles = {s: s for s in secrets} | {s.rsplit("-", 1)[-1]: s for s in secrets}
    found = []
    for where, text in sources:
        for needle, secret in needles.items():
            if needle in text:
                found.append(f"{where}: {secret[:12]}…")
    return found


def stored_texts(providers: list[str]) -> Iterator[tuple[str, str]]:
    """Every request-log row and disable event, as the text of all their fields."""

    from accounts.models import DisableEvent, RequestLog

    for row in RequestLog.objects.all().values().iterator():
        yield f"RequestLog {row['request_id']}", orjson.dumps(row, default=str).decode()
    for event in DisableEvent.objects.all().values().iterator():
        yield f"DisableEvent {event['id']}", orjson.dumps(event, default=str).decode()


def rendered_pages(providers: list[str]) -> Iterator[tuple[str, str]]:
    """Admin and dashboard pages as a staff user sees them: lists, and each account, event and failed request."""

    from django.contrib.auth.models import User
    from django.test import Client
    from django.urls import reverse

    from accounts.models import Account, ApiKey, DisableEvent, Provider, RequestLog

    user, _ = User.objects.get_or_create(username="soak-staff", defaults={"is_staff": True, "is_superuser": True})
    client = Client()
    client.force_login(user)
    urls = [reverse("admin:index"), reverse("admin:accounts_account_import")]
    for model in (Provider, Account, ApiKey, DisableEvent, RequestLog):
        info = (model._meta.app_label, model._meta.model_name)
        urls.append(reverse("admin:%s_%s_changelist" % info))
        objects = model.objects.all()
        if model is RequestLog:
            objects = objects.exclude(status=200)[:30]
        urls += [reverse("admin:%s_%s_change" % info, args=[o.pk]) for o in objects]
    urls += ["/dashboard/", "/dashboard/usage/", "/dashboard/events/", "/dashboard/requests/",
             "/dashboard/requests/?status=502"]
    urls += [f"/dashboard/accounts/{pk}/" for pk in Account.objects.values_list("pk", flat=True)]
    urls += [f"/dashboard/requests/{rid}/" for rid in
             RequestLog.objects.exclude(status=200).values_list("request_id", flat=True)[:30]]
    for url in urls:
        response = client.get(url)
        if response.status_code != 404:  # a page another part of the project has not built yet
            yield f"page {url} ({response.status_code})", response.content.decode("utf-8", "replace")


def log_file_text(server: Server) -> Iterator[tuple[str, str]]:
    path = ROOT / "artifacts" / f"server-{server.port}.log"
    if not path.exists():
        raise RuntimeError(f"{path} is missing: start the gateway with {ROOT / 'artifacts'} in place")
    yield str(path), path.read_text(errors="replace")


# ----------------------------------------------------------------- the whole soak


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
    started = time.monotonic()
    asyncio.run(drive(gateway.url, pool.client_key, clients, warmup, rng, tally, pool.secrets, pid))
    settle(mock)
    rss_before = rss_kb(pid)
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
        "clients": clients, "seconds": round(soak_seconds, 1), "requests_sent": tally.sent,
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
GATEWAY_ENV = {"GATEWAY_MAX_ATTEMPTS": "4", "GATEWAY_KEEPALIVE_SECONDS": "1", "LOG_LEVEL": "INFO", "DEBUG": "0"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=180.0, help="length of the soak after the warm-up")
    parser.add_argument("--warmup", type=float, default=20.0)
    parser.add_argument("--idle-expiry", type=float, default=65.0,
                        help="then wait this long and count upstream sockets again (0: skip)")
    parser.add_argument("--database-url", default="", help="default: a scratch SQLite file")
    args = parser.parse_args(argv)

    import tempfile

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
