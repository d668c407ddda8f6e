"""Two gateway processes share session affinity and the accounts' rate limits through Redis (REDIS_URL).

Turns of one session alternate between the two processes; the scripted upstream says which account
each reached. Without sharing, each process would choose its own account for the session, and the
second would not know that the first had used an account's requests up.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.db import connection

from accounts.config_file import load
from accounts.models import RequestLog
from tests.servers import Server, database_url, gateway_processes, received

from . import clients
from .conftest import CLIENT_KEY, pool_config

REDIS_URL = os.environ.get("REDIS_URL", "")
pytestmark = pytest.mark.skipif(not REDIS_URL, reason="needs REDIS_URL (shared state across processes)")


@pytest.fixture
def two(transactional_db: Any, mock_upstream: Server) -> Iterator[list[Server]]:
    with gateway_processes(database_url(connection.settings_dict), 2, {"REDIS_URL": REDIS_URL}) as servers:
        yield servers


def chat_turns(gateways: list[Server], model: str, session: str, turns: int) -> None:
    history: list[dict[str, Any]] = []
    for n in range(turns):
        client = clients.anthropic_client(gateways[n % 2].url, CLIENT_KEY,
                                          default_headers={"X-Claude-Code-Session-Id": session})
        history.append({"role": "user", "content": f"{session} turn {n}"})
        reply = client.messages.create(model=model, max_tokens=20, messages=history)
        history.append({"role": "assistant", "content": reply.content[0].text})  # type: ignore[union-attr]


def test_a_sessions_turns_alternating_between_two_processes_land_on_one_account(
        two: list[Server], mock_upstream: Server) -> None:
    load(pool_config(mock_upstream, {"anthropic": [f"sk-good-shared-{i}" for i in range(5)]}))
    httpx.post(mock_upstream.url + "/_mock/reset")
    sessions = [f"shared-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    for session in sessions:
        chat_turns(two, "up-anthropic/mock-text", session, 6)
    for session in sessions:
        reached = {r["key_suffix"] for r in received(mock_upstream) if session in str(r["body"])}
        assert len(reached) == 1, (session, reached)
    homes = {next(r["key_suffix"] for r in received(mock_upstream) if s in str(r["body"])) for s in sessions}
    assert len(homes) == 3  # new sessions spread


def test_what_one_process_learns_of_an_accounts_rate_limit_the_other_obeys(
        two: list[Server], mock_upstream: Server) -> None:
    load(pool_config(mock_upstream, {"anthropic": [f"sk-good-rl2r-{i}-shr{i}" for i in range(3)]}))
    httpx.post(mock_upstream.url + "/_mock/reset")
    session = f"limited-{uuid.uuid4().hex[:8]}"
    model = f"up-anthropic/mock-text-{uuid.uuid4().hex[:6]}"
    history: list[dict[str, Any]] = []

    def turn(gateway: Server, n: int) -> None:
        client = clients.anthropic_client(gateway.url, CLIENT_KEY, default_headers={"X-Claude-Code-Session-Id": session})
        history.append({"role": "user", "content": f"turn {n}"})
        reply = client.messages.create(model=model, max_tokens=20, messages=history)
        history.append({"role": "assistant", "content": reply.content[0].text})  # type: ignore[union-attr]

    turn(two[0], 0)
    turn(two[0], 1)  # its account has no request left this minute, as the answer's headers say
    time.sleep(1.5)  # the processes share what they learnt every half second
    turn(two[1], 2)
    accounts = [r["key_suffix"] for r in received(mock_upstream)]
    assert len(accounts) == 3 and accounts[0] == accounts[1] != accounts[2]
    assert httpx.get(mock_upstream.url + "/_mock/ratelimits").json()["refused"] == 0
    deadline = time.monotonic() + 5
    while RequestLog.objects.filter(model_requested=model).count() < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    rows = RequestLog.objects.filter(model_requested=model).order_by("created_at")
    assert [(r.affinity, r.affinity_reason) for r in rows] == [("assigned", ""), ("kept", ""), ("moved", "quota")]
