"""Issue 20's acceptance with the real Claude Code and Codex: a session keeps its account in a pool of five,
so it reads as much from the prompt cache as on a pool of one, and its signed reasoning is never refused.

Each client holds one conversation of two runs (Claude Code ``-p`` then ``-p --continue``; Codex
``exec`` then ``exec resume --last``), each run a tool loop of two requests (the ask, then the
tool's result), so four requests whose prefixes grow. The model, ``mock-shell-reasoning``, thinks
before it calls the tool: its reasoning is signed for the account that answered (Anthropic's
thinking ``signature``, the Responses ``encrypted_content``), and the client sends it back with
the tool's result and again on the next run. The scripted upstream refuses it (400, as the
providers do) from any other account, caches prompts per account, and counts requests per account.

The same conversation runs twice, on a pool of five accounts and on a pool of one (the cache's
ideal: every turn on one account), with the same prompts and paths of the same length, so the two
send prompts of the same size: the cache-read tokens the client reports must be equal.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.utils import timezone

from accounts.config_file import load
from accounts.models import RequestLog
from tests.clients import agents
from tests.clients.conftest import UPSTREAMS, Marker
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, received, seen

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ACCOUNTS = 5
MODEL = "mock-shell-reasoning"
REQUESTS = 4  # two runs of a two-request tool loop
# The session signal the request log names for each client (README "Which session a request belongs to").
SIGNAL = {"claude": "x-claude-code-session-id", "codex": "prompt_cache_key"}


def model(size: int, upstream: str) -> str:
    """The alias for the pool of ``size`` on ``upstream``: of one length whatever the size (the clients
    put the model's name in their prompts)."""

    return f"pool{size}-{upstream}"


@pytest.fixture
def pools(transactional_db: Any, mock_upstream: Server, gateway: Server) -> None:
    """Per upstream protocol: ``five-<p>`` with five accounts and ``solo-<p>`` with one."""

    five = pool_config(mock_upstream, {p: [f"sk-good-{p}-five-{i}" for i in range(ACCOUNTS)] for p in UPSTREAMS})
    solo = pool_config(mock_upstream, {p: [f"sk-good-{p}-solo-x"] for p in UPSTREAMS})
    for provider in five["providers"]:
        provider["name"] = provider["name"].replace("up-", "five-")
    for provider in solo["providers"]:
        provider["name"] = provider["name"].replace("up-", "solo-")
    load({"providers": [*five["providers"], *solo["providers"]], "client_keys": five["client_keys"],
          "aliases": [{"name": model(size, p), "provider": f"{name}-{p}", "model": MODEL}
                      for p in UPSTREAMS for size, name in ((ACCOUNTS, "five"), (1, "solo"))]})
    seen(gateway)


def markers() -> list[Marker]:
    # Fixed numbers: the pool of five and the pool of one must be sent prompts of the same size.
    return [Marker(f"echo acc-tool-ok-$(({a}*{b}))", f"acc-tool-ok-{a * b}") for a, b in ((4321, 8765), (5678, 1234))]


def claude_conversation(gateway_url: str, alias: str, prompts: list[str], tmp: Path) -> list[agents.Run]:
    """One Claude Code session over two runs: ``claude -p``, then ``claude -p --continue`` (same session id)."""

    home, work = agents.dirs(tmp)
    env = agents.claude_code_env(home, alias, ANTHROPIC_BASE_URL=gateway_url, ANTHROPIC_API_KEY=CLIENT_KEY)
    runs = []
    for i, prompt in enumerate(prompts):
        command = [agents.executable("claude"), "-p", prompt, *(["--continue"] if i else []), "--output-format",
                   "stream-json", "--verbose", "--model", alias, "--allowedTools", "Bash"]
        runs.append(agents.run(command, work, env))
    return runs


def conversation(client: str, gateway: Server, alias: str, tmp: Path) -> tuple[list[agents.Run], int]:
    """The conversation's runs, and the cache-read tokens the client reported over them."""

    tmp.mkdir()
    prompts = [m.prompt for m in markers()]
    if client == "claude":
        runs = claude_conversation(gateway.url, alias, prompts, tmp)
        results = [e for run in runs for e in run.events if e.get("type") == "result"]
        assert len(results) == len(runs) and not any(r["is_error"] for r in results), _why(runs)
        return runs, sum(r["usage"].get("cache_read_input_tokens") or 0 for r in results)
    runs = agents.codex_conversation(gateway.url, CLIENT_KEY, alias, prompts, tmp, compact_above=10**9)
    turns = [e for run in runs for e in run.events if e.get("type") == "turn.completed"]
    assert len(turns) == len(runs), _why(runs)
    return runs, sum(t["usage"].get("cached_input_tokens") or 0 for t in turns)


def _why(runs: list[agents.Run]) -> str:
    return "".join(run.transcript() for run in runs)


def logged(since: dt.datetime, count: int, timeout: float = 15.0) -> list[tuple[int, str, str, str, int | None]]:
    """(status, affinity, reason, session signal, account) of the request log's rows since ``since``, oldest
    first, once there are ``count`` (the log is written behind the answers)."""

    deadline = time.monotonic() + timeout
    rows = RequestLog.objects.filter(created_at__gte=since, client_key_name="e2e").order_by("created_at")
    while rows.count() < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return list(rows.values_list("status", "affinity", "affinity_reason", "session_signal", "account_id"))


def reasoning_sent_back(upstream: str, requests: list[dict[str, Any]]) -> list[str]:
    """The signed reasoning the upstream received back from the client, in its protocol's field."""

    out = []
    for request in requests:
        body = request["body"]
        if upstream == "anthropic":
            out += [b["signature"] for m in body.get("messages", []) if isinstance(m.get("content"), list)
                    for b in m["content"] if isinstance(b, dict) and b.get("type") == "thinking"]
        elif upstream == "responses":
            out += [i["encrypted_content"] for i in body.get("input", []) if isinstance(i, dict)
                    and i.get("type") == "reasoning" and i.get("encrypted_content")]
    return [s for s in out if s.startswith("sig-")]  # minted by the scripted upstream for an account


@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("client", ["claude", "codex"])
def test_a_cli_session_keeps_one_account_reads_the_cache_of_a_single_account_and_its_reasoning_is_accepted(
        pools: None, gateway: Server, mock_upstream: Server, tmp_path: Path, client: str, upstream: str) -> None:
    outcomes = {}
    for size, place in ((ACCOUNTS, "pool"), (1, "solo")):  # paths of one length: the clients show their cwd
        httpx.post(mock_upstream.url + "/_mock/reset")
        started = timezone.now()
        runs, cache_read = conversation(client, gateway, model(size, upstream), tmp_path / place)
        why = _why(runs)
        for run, marker in zip(runs, markers()):
            assert run.returncode == 0 and marker.output in run.stdout, why
        requests = received(mock_upstream)
        by_key = httpx.get(mock_upstream.url + "/_mock/stats").json()["by_key"]
        rows = logged(started, REQUESTS)
        outcomes[place] = (cache_read, by_key, rows, requests)
        # Each request once (a retry elsewhere, or a refusal, would add one) and all on one account.
        assert len(requests) == REQUESTS and len(by_key) == 1, (by_key, why)
        assert [r[0] for r in rows] == [200] * REQUESTS and len({r[4] for r in rows}) == 1, (rows, why)
        if upstream != "openai_chat":  # Chat has no signed reasoning: nothing to send back there
            assert len(reasoning_sent_back(upstream, requests)) >= REQUESTS - 1, why

    cache_read, by_key, rows, _ = outcomes["pool"]
    ((key, count),) = by_key.items()
    assert key in {f"...ve-{i}" for i in range(ACCOUNTS)} and count == REQUESTS  # one of the five (last four shown)
    assert [(r[1], r[2], r[3]) for r in rows] == [("assigned", "", SIGNAL[client])] + \
        [("kept", "", SIGNAL[client])] * (REQUESTS - 1), rows
    assert cache_read > 0, outcomes  # the later turns read the earlier ones' prefix
    assert cache_read == outcomes["solo"][0], {p: o[0] for p, o in outcomes.items()}


@pytest.mark.parametrize(("client", "upstream"), [("claude", "anthropic"), ("codex", "responses")])
def test_without_affinity_the_same_session_moves_and_its_reasoning_is_refused(
        pools: None, gateway: Server, mock_upstream: Server, tmp_path: Path, client: str, upstream: str) -> None:
    """The control: what the test above rules out happens with affinity off (the pool rotates)."""

    load({"providers": [{"name": f"five-{upstream}", "protocol": upstream, "base_url": f"{mock_upstream.url}/v1",
                         "affinity": False}]})
    seen(gateway)
    httpx.post(mock_upstream.url + "/_mock/reset")
    started = timezone.now()
    tmp_path.joinpath("pool").mkdir()
    prompt = markers()[0].prompt
    if client == "claude":
        runs = claude_conversation(gateway.url, model(ACCOUNTS, upstream), [prompt], tmp_path / "pool")
    else:
        runs = [agents.codex(gateway.url, CLIENT_KEY, model(ACCOUNTS, upstream), prompt, tmp_path / "pool")]
    rows = logged(started, 2)
    accounts = [r["key_suffix"] for r in received(mock_upstream)]
    assert len(set(accounts)) >= 2, (accounts, _why(runs))  # the tool's result went to another account
    assert 400 in [r[0] for r in rows], (rows, _why(runs))  # which refused the reasoning minted by the first
