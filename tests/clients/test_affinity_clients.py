"""The real Claude Code and Codex through a pool of five accounts per upstream protocol: every request of a
session reaches one account, and the sessions spread over the pool.

Each run is one session (a tool loop: the ask, then the tool's result, sent as two requests);
several runs one after the other are several sessions. The scripted upstream records which
account each request reached; each session's own command (in its prompt, so in every request
it sends) tells them apart. Codex's second run resumes its first session (``codex exec resume
--last``), a new process on the same thread: it must find the same account.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import httpx
import pytest

from accounts.config_file import load
from tests.clients import agents
from tests.clients.conftest import UPSTREAMS, Marker, alias
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, received, seen

pytestmark = pytest.mark.django_db(transaction=True)

ACCOUNTS = 5


@pytest.fixture
def pool_of_five(transactional_db: Any, mock_upstream: Server, gateway: Server) -> None:
    config = pool_config(mock_upstream, {p: [f"sk-good-{p}-five-{i}" for i in range(ACCOUNTS)] for p in UPSTREAMS})
    config["aliases"] = [{"name": alias(p), "provider": f"up-{p}", "model": "mock-shell"} for p in UPSTREAMS]
    load(config)
    seen(gateway)
    httpx.post(mock_upstream.url + "/_mock/reset")


def markers(n: int) -> list[Marker]:
    out = []
    for _ in range(n):
        a, b = random.randint(1000, 9999), random.randint(1000, 9999)
        out.append(Marker(f"echo acc-tool-ok-$(({a}*{b}))", f"acc-tool-ok-{a * b}"))
    return out


def accounts_of(mock: Server, marker: Marker) -> list[str]:
    return [r["key_suffix"] for r in received(mock) if marker.command in str(r["body"])]


@pytest.mark.parametrize("upstream", UPSTREAMS)
def test_claude_code_sessions_each_keep_one_account(pool_of_five: None, gateway: Server, mock_upstream: Server,
                                                    tmp_path: Path, upstream: str) -> None:
    sessions = markers(3)
    for i, marker in enumerate(sessions):
        (tmp_path / f"s{i}").mkdir()
        run = agents.claude_code(gateway.url, CLIENT_KEY, alias(upstream), marker.prompt, tmp_path / f"s{i}")
        assert run.returncode == 0 and marker.output in run.stdout, run.transcript()
    reached = {m.command: accounts_of(mock_upstream, m) for m in sessions}
    assert all(len(a) >= 2 and len(set(a)) == 1 for a in reached.values()), reached
    assert len({a[0] for a in reached.values()}) == len(sessions), reached  # each session its own account


@pytest.mark.parametrize("upstream", UPSTREAMS)
def test_codex_sessions_each_keep_one_account_even_when_resumed(pool_of_five: None, gateway: Server,
                                                                mock_upstream: Server, tmp_path: Path,
                                                                upstream: str) -> None:
    first, second = markers(2)
    (tmp_path / "resumed").mkdir()
    (tmp_path / "other").mkdir()
    runs = agents.codex_conversation(gateway.url, CLIENT_KEY, alias(upstream), [first.prompt, second.prompt],
                                     tmp_path / "resumed", compact_above=10**9)
    for run, marker in zip(runs, (first, second)):
        assert run.returncode == 0 and marker.output in run.stdout, run.transcript()
    other = markers(1)[0]
    run = agents.codex(gateway.url, CLIENT_KEY, alias(upstream), other.prompt, tmp_path / "other")
    assert run.returncode == 0 and other.output in run.stdout, run.transcript()
    resumed = accounts_of(mock_upstream, first)  # the second run resends the first: every request of the thread
    assert len(resumed) >= 4 and len(set(resumed)) == 1, resumed
    alone = accounts_of(mock_upstream, other)
    assert len(alone) >= 2 and len(set(alone)) == 1 and alone[0] != resumed[0], (resumed, alone)
