"""The soak's load: its pool of good and failing accounts, the request mix, and the clients.

See :mod:`tests.hardening.soak` for what the soak shows and how to run it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from tests.servers import free_port

PROTOCOLS = ("openai_chat", "anthropic", "responses")
PATHS = {"openai_chat": "/v1/chat/completions", "anthropic": "/v1/messages", "responses": "/v1/responses"}
HELLO = "Hello! This is the mock upstream."
FAULT_MODELS = ("mock-disconnect", "mock-truncated", "mock-stall", "mock-malformed")
# Per upstream provider: a key marker and how many accounts carry it ("good" accounts answer normally).
ACCOUNTS = [("good", 13), ("fail-500", 1), ("fail-403-tokens", 1), ("fail-403-cost", 1), ("fail-429", 1),
            ("fail-401", 1), ("fail-402", 1), ("fail-stream-error", 1)]
DISABLING = ("fail-429", "fail-401", "fail-402", "fail-stream-error")  # must be disabled, once at a time
COOLING = ("fail-429", "fail-stream-error")  # a 429 with Retry-After cools down, and may fail again later
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
    # Affinity off: the soak meets every fault at a steady share because requests rotate over every
    # account, faulty ones included; sessions that keep their account are soaked by the agents bench.
    timeouts = {"connect_timeout": 1.0, "first_byte_timeout": 2.0, "idle_timeout": 1.0, "affinity": False}
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
    rss_kb: list[int] = field(default_factory=list)  # the gateway's resident memory every 10 s

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
    # over a second or two, as they would in life: a burst of hundreds of connects at once tests the
    # kernel's listen backlog, not the gateway.
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
        rss = _rss_kb(pid)
        tally.rss_kb.append(rss)
        tally.timeline.append(f"{(now_answered - answered) / every:.0f}/s cpu {(now_cpu - cpu) / every:.0%} "
                              f"rss {rss / 1024:.0f} MB load {os.getloadavg()[0]:.1f}{_pressure()}")
        answered, cpu = now_answered, now_cpu


def _rss_kb(pid: int | None) -> int:
    if pid is None:
        return 0
    for line in open(f"/proc/{pid}/status").read().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


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


