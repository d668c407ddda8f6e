"""The agent workload: ``python -m bench.agents [--quick] [--json PATH]`` (``make bench``'s ``agents`` section).

S concurrent sessions × T turns of three kinds, each over a pool of 20 accounts on its upstream
protocol, on the scripted upstream:

- Claude-Code-like on ``/v1/messages``: ``X-Claude-Code-Session-Id``, a long system prompt and
  the tools marked ``cache_control``, the whole conversation resent each turn;
- Codex-like on ``/v1/responses``: ``store: false``, ``prompt_cache_key`` (its thread), long
  instructions, the conversation resent;
- plain Chat on ``/v1/chat/completions``: no session hint at all.

The accounts have rate limits as a real pool's do, of mixed tiers: a quarter of them allow few
requests a minute, the rest more (``mockupstream/ratelimits.py`` markers in their keys), so that
selection blind to quota sends the small accounts more than they take and meets 429s.

Three runs, each on a fresh copy of one migrated database, a fresh gateway process and the
upstream reset: **ideal** (one account per protocol, no limits: every turn of a session on one
account, the cache as good as it gets), **today** (least recently used, affinity and quota
tracking off: ``GATEWAY_POOL_QUOTA=0``, providers' ``affinity = false``) and **new** (the
defaults). For each: upstream 429s (the upstream's own count) per client request, errors the
clients saw, the busiest account's requests ÷ its fair share (the larger of requests ÷ accounts
and requests ÷ sessions), the share of cacheable input read from cache against the ideal run's,
and the cost against the ideal (input at 1, cache reads at 0.1, cache writes at 1.25 (Anthropic)
per token; output at 5). Cache figures are read from the usage the upstream returns, so they stay
0 on an upstream that reports no cache.

And, in this process: memory per tracked session (``MemoryAffinity`` holding 100,000), and what
affinity and quota tracking add per request: the session's identity from a Claude-Code-sized
body, the selector's pick over a pool that answers at once (against that pool alone; both run
without an event loop, whose round costs more than the pick), and reading an answer's rate-limit
headers (the selector's figure includes that read; it is also shown alone). Each figure is the
best of many short slices, and the metrics observer's (README: 5–12 µs a request) is measured alike
beside them, so that a busy machine's figures can be read at scale.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ACCOUNTS = 20
KINDS = {"claude": ("anthropic", "/v1/messages"), "codex": ("responses", "/v1/responses"),
         "chat": ("openai_chat", "/v1/chat/completions")}
CLIENT_KEY = "gw-bench-agents-key"
MODEL = "mock-text"
SYSTEM = ("You are a careful coding agent. Follow the repository's conventions, run the tests, explain what "
          "you changed. ") * 60  # ~6,000 characters: past the providers' 1,024-token caching minimum
TOOLS = [{"name": f"tool_{i}", "description": "Does one thing well. " * 20,
          "input_schema": {"type": "object", "properties": {"arg": {"type": "string"}}}} for i in range(8)]
PRICE = {"input": 1.0, "cache_read": 0.1, "cache_write": 1.25, "output": 5.0}  # relative, per token


@dataclass(frozen=True)
class Plan:
    sessions: int  # per kind
    turns: int
    small_requests: int  # per minute, a quarter of the accounts
    large_requests: int  # per minute, the rest

    @classmethod
    def for_mode(cls, quick: bool) -> Plan:
        # Blind least-recently-used spreads S*T requests evenly: S*T/20 an account, past the small accounts' limit.
        return cls(8, 6, 1, 8) if quick else cls(16, 10, 4, 20)


def config(upstream_url: str, run: str) -> str:
    lines = []
    for kind, (protocol, _) in KINDS.items():
        lines += ["[[providers]]", f'name = "ag-{kind}"', f'protocol = "{protocol}"', f'base_url = "{upstream_url}/v1"',
                  "models = []", "first_byte_timeout = 30.0", "idle_timeout = 30.0",
                  f"affinity = {'false' if run == 'today' else 'true'}", ""]
        for i in range(1 if run == "ideal" else ACCOUNTS):
            lines += ["[[providers.accounts]]", f'label = "{kind}-{i}"', f'api_key = "{account_key(kind, i, run)}"', ""]
    lines += ["[[client_keys]]", 'name = "agents"', f'key = "{CLIENT_KEY}"', ""]
    return "\n".join(lines)


def account_key(kind: str, i: int, run: str) -> str:
    """Keys end in 4 characters of their own (the upstream counts by them); the marker sets the limits."""

    if run == "ideal":
        return f"sk-agents-{kind}-ideal-{kind[:2]}zz"
    return f"sk-agents-{kind}-RL-{kind[:2]}{i:02d}"


def limited(key: str, plan: Plan) -> str:
    i = int(key[-2:])
    per_minute = plan.small_requests if i % 4 == 0 else plan.large_requests
    return key.replace("RL", f"rl{per_minute}r")


# ----------------------------------------------------------------- the sessions


@dataclass
class Tally:
    requests: int = 0
    errors: int = 0
    input: int = 0  # uncached input tokens
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    error_samples: list[str] = field(default_factory=list)

    def add_usage(self, kind: str, usage: dict[str, Any]) -> None:
        if kind == "claude":
            self.input += usage.get("input_tokens") or 0
            self.cache_read += usage.get("cache_read_input_tokens") or 0
            self.cache_write += usage.get("cache_creation_input_tokens") or 0
            self.output += usage.get("output_tokens") or 0
            return
        details = usage.get("input_tokens_details" if kind == "codex" else "prompt_tokens_details") or {}
        cached = details.get("cached_tokens") or 0
        total_in = usage.get("input_tokens" if kind == "codex" else "prompt_tokens") or 0
        self.input += total_in - cached
        self.cache_read += cached
        self.output += usage.get("output_tokens" if kind == "codex" else "completion_tokens") or 0

    @property
    def cacheable(self) -> int:
        return self.input + self.cache_read + self.cache_write

    @property
    def cost(self) -> float:
        return (self.input * PRICE["input"] + self.cache_read * PRICE["cache_read"]
                + self.cache_write * PRICE["cache_write"] + self.output * PRICE["output"])


def request_of(kind: str, session: str, history: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, str]]:
    mark = {"type": "ephemeral"}
    if kind == "claude":
        # Claude Code sends every message as a list of blocks and marks only the newest: the turn
        # before's marked block must be the same block unmarked now, or its cache is never read.
        messages = [{"role": m["role"], "content": [{"type": "text", "text": m["content"]}]} for m in history]
        messages[-1]["content"][0]["cache_control"] = mark
        return ({"model": f"ag-claude/{MODEL}", "max_tokens": 32000,
                 "system": [{"type": "text", "text": SYSTEM, "cache_control": mark}],
                 "tools": [{**t, "cache_control": mark} if i == len(TOOLS) - 1 else t for i, t in enumerate(TOOLS)],
                 "messages": messages, "metadata": {"user_id": f"user_bench_session_{session}"}},
                {"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01", "X-Claude-Code-Session-Id": session})
    if kind == "codex":
        return ({"model": f"ag-codex/{MODEL}", "instructions": SYSTEM, "input": history, "store": False,
                 "prompt_cache_key": session,
                 "tools": [{"type": "function", "name": t["name"], "description": t["description"],
                            "parameters": t["input_schema"]} for t in TOOLS]},
                {"authorization": f"Bearer {CLIENT_KEY}", "session-id": session})
    return ({"model": f"ag-chat/{MODEL}", "messages": [{"role": "system", "content": SYSTEM}, *history],
             "tools": [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                         "parameters": t["input_schema"]}} for t in TOOLS]},
            {"authorization": f"Bearer {CLIENT_KEY}"})


def answer_text(kind: str, body: dict[str, Any]) -> str:
    try:
        if kind == "claude":
            return "".join(b.get("text", "") for b in body["content"])
        if kind == "codex":
            return "".join(c.get("text", "") for item in body["output"] if item.get("type") == "message"
                           for c in item["content"])
        return str(body["choices"][0]["message"]["content"] or "")
    except (KeyError, IndexError, TypeError):
        return ""


async def one_session(http: Any, url: str, kind: str, turns: int, tally: Tally) -> None:
    import aiohttp

    session = str(uuid.uuid4())
    history: list[dict[str, Any]] = []
    for turn in range(turns):
        history.append({"role": "user", "content": f"Turn {turn} of session {session}: "
                        + "please look at this file and fix the failing test. " * 8})
        body, headers = request_of(kind, session, history)
        tally.requests += 1
        try:
            async with http.post(url + KINDS[kind][1], json=body, headers=headers) as response:
                answer = await response.json(content_type=None)
                if response.status != 200:
                    tally.errors += 1
                    if len(tally.error_samples) < 3:
                        tally.error_samples.append(f"{response.status} {str(answer)[:200]}")
                    history.append({"role": "assistant", "content": "(failed)"})
                    continue
        except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
            tally.errors += 1
            tally.error_samples.append(type(exc).__name__)
            history.append({"role": "assistant", "content": "(failed)"})
            continue
        tally.add_usage(kind, answer.get("usage") or {})
        history.append({"role": "assistant", "content": answer_text(kind, answer) or "ok"})


async def workload(url: str, plan: Plan) -> dict[str, Tally]:
    import aiohttp

    tallies = {kind: Tally() for kind in KINDS}
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as http:
        await asyncio.gather(*(one_session(http, url, kind, plan.turns, tallies[kind])
                               for kind in KINDS for _ in range(plan.sessions)))
    return tallies


# ----------------------------------------------------------------- the runs


def one_run(procs: Any, workdir: Path, template: Path, mock: Any, run: str, plan: Plan) -> dict[str, Any]:
    import urllib.request

    from .procs import gateway_env

    db = workdir / f"{run}.sqlite3"
    shutil.copyfile(template, db)
    env = {**gateway_env(f"sqlite:///{db}"), "GATEWAY_LOG_SPOOL_DIR": ""}
    text = config(mock.url, run)
    if run != "ideal":
        for kind in KINDS:
            for i in range(ACCOUNTS):
                key = account_key(kind, i, run)
                text = text.replace(key, limited(key, plan))
    (workdir / f"{run}.toml").write_text(text)
    procs.manage(env, "loadconfig", str(workdir / f"{run}.toml"))
    if run == "today":
        env["GATEWAY_POOL_QUOTA"] = "0"
    urllib.request.urlopen(urllib.request.Request(mock.url + "/_mock/reset", method="POST")).read()
    gateway = procs.gateway(f"gateway-{run}", env)
    started = time.monotonic()
    try:
        tallies = asyncio.run(workload(gateway.url, plan))
    finally:
        procs.stop(gateway)
    seconds = time.monotonic() - started
    stats = json.loads(urllib.request.urlopen(mock.url + "/_mock/stats").read())
    limits = json.loads(urllib.request.urlopen(mock.url + "/_mock/ratelimits").read())
    out: dict[str, Any] = {"seconds": round(seconds, 1), "upstream_429s": limits["refused"],
                           "upstream_requests": stats["requests"], "kinds": {}}
    by_key = Counter({k: v for k, v in stats["by_key"].items()})
    for kind, tally in tallies.items():
        prefix = "..." + kind[:2]
        per_account = [n for key, n in by_key.items() if key.startswith(prefix)]
        fair = max(tally.requests / (1 if run == "ideal" else ACCOUNTS), tally.requests / plan.sessions)
        out["kinds"][kind] = {
            "requests": tally.requests, "errors": tally.errors, "error_samples": tally.error_samples,
            "busiest_over_fair_share": round(max(per_account, default=0) / fair, 2) if fair else None,
            "cache_read": tally.cache_read, "cache_write": tally.cache_write, "uncached_input": tally.input,
            "cacheable": tally.cacheable, "output": tally.output, "cost": round(tally.cost, 1)}
    requests = sum(t.requests for t in tallies.values())
    out["requests"] = requests
    out["client_errors"] = sum(t.errors for t in tallies.values())
    out["upstream_429_share"] = round(limits["refused"] / requests, 4) if requests else None
    return out


def overhead(rounds: int) -> dict[str, Any]:
    """In a child process (Django configured there): memory per tracked session, and the µs per request."""

    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([sys.executable, "-m", "bench.agents", "--overhead", "--rounds", str(rounds),
                        "--json", out.name], cwd=ROOT, check=True, timeout=600)
        return dict(json.loads(Path(out.name).read_text()))


def measure_overhead(rounds: int) -> dict[str, Any]:
    import tracemalloc

    from .features import configure

    configure()
    from accounts.models import Account
    from gateway.exchange.affinity import Affinity, MemoryAffinity
    from gateway.exchange.headroom import HeadroomBook
    from gateway.exchange.selection import Selector
    from gateway.exchange.session import session_of
    from tests.gateway.fakes import exchange, provider

    n = 100_000
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    memory = MemoryAffinity(cap=n)
    for i in range(n):
        memory.remember(1, i.to_bytes(16, "big"), i % 20, 300)
    per_session = (tracemalloc.get_traced_memory()[0] - before) / n
    tracemalloc.stop()

    session_id = str(uuid.uuid4())
    body, headers = request_of("claude", session_id, [{"role": "user", "content": "hello " * 200}] * 9)
    plain_body, _ = request_of("chat", session_id, [{"role": "user", "content": "hello " * 200}] * 9)
    accounts = [Account(id=i, provider_id=1, label=f"a{i}") for i in range(1, ACCOUNTS + 1)]

    class Instant:
        """A pool that answers at once: what is left is the selector's own work."""

        def __init__(self) -> None:
            self.i = 0

        async def pick(self, provider_id: int, exclude: Any, strategy: str, prefer: int | None = None) -> Account:
            if prefer is not None and prefer not in exclude:
                return accounts[prefer - 1]
            self.i = (self.i + 1) % len(accounts)
            return accounts[self.i]

    prov = provider(1, "anthropic")
    answer_headers = {"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "41",
                      "anthropic-ratelimit-requests-reset": "2030-01-01T00:00:10Z",
                      "anthropic-ratelimit-input-tokens-limit": "30000",
                      "anthropic-ratelimit-input-tokens-remaining": "29000",
                      "anthropic-ratelimit-input-tokens-reset": "2030-01-01T00:00:10Z"}

    def timed(*fns: Any) -> list[float]:
        """µs a call of each: the best of many short slices (200 calls, a few ms: shorter than a busy
        scheduler's time slice), taken in turns (a shared machine's noise only ever adds, and two
        figures to be subtracted meet the same noise)."""

        for fn in fns:
            for _ in range(200):
                fn()
        per_slice = 200
        slices = max(20, rounds // per_slice)
        best = [float("inf")] * len(fns)
        for _ in range(slices):
            for i, fn in enumerate(fns):
                t0 = time.perf_counter()
                for _ in range(per_slice):
                    fn()
                best[i] = min(best[i], (time.perf_counter() - t0) / per_slice * 1e6)
        return best

    ex = exchange("anthropic", {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}, prov)
    pool = Instant()
    selector = Selector(pool, Affinity(), HeadroomBook())  # type: ignore[arg-type]
    sessions = [session_of("anthropic", {"x-claude-code-session-id": f"s{i}"}, body, 1) for i in range(1000)]
    for i, account in enumerate(accounts):
        selector.headroom.observe(1, account.pk, 200, answer_headers)

    def now(coro: Any) -> Any:
        """A coroutine that never waits (memory only, this instant pool), run to its end without an event
        loop: a loop's round costs more than the work measured, and its noise drowned the difference."""

        try:
            coro.send(None)
        except StopIteration as done:
            return done.value
        raise RuntimeError("the pick waited for something")

    counter = [0]

    def pick_with() -> None:
        """One turn of one of 1,000 sessions: the pick, its answer's rate-limit headers read, the slot back."""

        ex.session = sessions[counter[0] % 1000]
        counter[0] += 1
        ex.session_account = None
        ex.record.affinity = ""
        account = now(selector.pick(ex, []))
        selector.headroom.observe(1, account.pk, 200, answer_headers)
        selector.release(account.pk)

    def pick_alone() -> None:
        now(pool.pick(1, [], "lru", None))

    for _ in range(1000):  # every session has its account: what follows are sessions' next turns
        pick_with()
    with_us, alone_us = timed(pick_with, pick_alone)
    selector_us = with_us - alone_us
    session_us, prefix_us, observe_us = timed(lambda: session_of("anthropic", headers, body, 1),
                                              lambda: session_of("openai_chat", {}, plain_body, 1),
                                              lambda: selector.headroom.observe(1, 3, 200, answer_headers))
    from .features import metrics_us

    return {"reference_metrics_observer_us": round(min(metrics_us(200) for _ in range(max(20, rounds // 200))), 2),
            "bytes_per_tracked_session": round(per_session), "session_identity_us": round(session_us, 2),
            "session_identity_from_prefix_us": round(prefix_us, 2),
            "selector_us": round(selector_us, 2), "rate_limit_headers_us": round(observe_us, 2),
            "added_us_per_request": round(session_us + selector_us, 2)}


def run(quick: bool = False) -> dict[str, Any]:
    """For ``python -m bench``: three runs against real processes, and the in-process figures."""

    from .procs import Processes, gateway_env

    plan = Plan.for_mode(quick)
    print(f"… agents (bench/agents.py): {plan.sessions} sessions × {plan.turns} turns of each of "
          f"{len(KINDS)} kinds over {ACCOUNTS} accounts per protocol", flush=True)
    results: dict[str, Any] = {"plan": vars(plan), "accounts": ACCOUNTS}
    with tempfile.TemporaryDirectory(prefix="bench-agents-") as tmp, Processes(Path(tmp)) as procs:
        workdir = Path(tmp)
        template = workdir / "template.sqlite3"
        procs.manage({**gateway_env(f"sqlite:///{template}"), "GATEWAY_LOG_SPOOL_DIR": ""}, "migrate", "--noinput")
        mock = procs.mock()
        for name in ("ideal", "today", "new"):
            results[name] = one_run(procs, workdir, template, mock, name, plan)
    results["in_process"] = overhead(5000 if quick else 20000)
    summarise(results)
    print_table(results)
    return results


def summarise(results: dict[str, Any]) -> None:
    ideal = results["ideal"]
    for name in ("today", "new"):
        r = results[name]
        reads = sum(k["cache_read"] for k in r["kinds"].values())
        ideal_reads = sum(k["cache_read"] for k in ideal["kinds"].values())
        cacheable = sum(k["cacheable"] for k in r["kinds"].values())
        ideal_cacheable = sum(k["cacheable"] for k in ideal["kinds"].values())
        share = reads / cacheable if cacheable else 0.0
        ideal_share = ideal_reads / ideal_cacheable if ideal_cacheable else 0.0
        r["cache_share"] = round(share, 4)
        r["cache_share_of_ideal"] = round(share / ideal_share, 3) if ideal_share else 0.0
        cost, ideal_cost = (sum(k["cost"] for k in x["kinds"].values()) for x in (r, ideal))
        r["cost_over_ideal"] = round(cost / ideal_cost, 3) if ideal_cost else None
        r["busiest_over_fair_share"] = max(k["busiest_over_fair_share"] or 0 for k in r["kinds"].values())
    results["ideal"]["cache_share"] = round(
        sum(k["cache_read"] for k in ideal["kinds"].values()) / max(1, sum(k["cacheable"] for k in ideal["kinds"].values())), 4)


def print_table(results: dict[str, Any]) -> None:
    print("\n== Agent workload: today's selection against the new (same sessions, same pool) ==")
    rows = [("upstream 429s, share of requests", "upstream_429_share", "{:.1%}"),
            ("errors the clients saw", "client_errors", "{}"),
            ("busiest account ÷ fair share", "busiest_over_fair_share", "{:.2f}"),
            ("cacheable input read from cache", "cache_share", "{:.1%}"),
            ("  … against the single-account ideal", "cache_share_of_ideal", "{:.2f}"),
            ("cost against the ideal", "cost_over_ideal", "{:.2f}")]
    print(f"{'':<40}{'today':>12}{'new':>12}")
    for label, key, fmt in rows:
        cells = []
        for name in ("today", "new"):
            value = results[name].get(key)
            cells.append("—" if value is None else fmt.format(value))
        print(f"{label:<40}{cells[0]:>12}{cells[1]:>12}")
    p = results["in_process"]
    print(f"memory per tracked session: {p['bytes_per_tracked_session']} bytes; affinity and quota tracking add "
          f"{p['added_us_per_request']} µs a request (session {p['session_identity_us']} µs, selector with the "
          f"answer's rate-limit headers {p['selector_us']} µs, of which the headers {p['rate_limit_headers_us']} µs; "
          f"a session named by its prefix {p['session_identity_from_prefix_us']} µs); for scale, the metrics observer "
          f"took {p['reference_metrics_observer_us']} µs a request in the same process")
    if results["ideal"]["cache_share"] == 0:
        print("(cache figures are 0: this upstream reports no cached tokens)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.agents", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--overhead", action="store_true", help="only the in-process figures")
    parser.add_argument("--rounds", type=int, default=20000)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    result = measure_overhead(args.rounds) if args.overhead else run(args.quick)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
