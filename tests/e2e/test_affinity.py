"""Sessions keep their account, and the pool reads the accounts' rate limits: through a real gateway, the
official SDKs and the scripted upstream (which says which account each request reached).

A pool of five accounts per upstream protocol. Several sessions talk at once, turn after turn,
each by the signal its kind of client sends; each session's marker is in every request it sends,
so the upstream's record of requests (``/_mock/requests``: the account of each) tells which
session went where.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from django.utils import timezone

from accounts.config_file import load
from accounts.models import RequestLog
from tests.servers import Server, received, seen

from . import clients
from .conftest import CLIENT_KEY, pool_config

ACCOUNTS = 5
SESSIONS = 5
TURNS = 4
UPSTREAMS = ("openai_chat", "anthropic", "responses")


@pytest.fixture
def five(transactional_db: Any, mock_upstream: Server, gateway: Server) -> dict[str, Any]:
    config = pool_config(mock_upstream, {p: [f"sk-good-{p}-{i}" for i in range(ACCOUNTS)] for p in UPSTREAMS})
    load(config)
    seen(gateway)
    httpx.post(mock_upstream.url + "/_mock/reset")
    return config


def homes(mock: Server, markers: list[str]) -> dict[str, list[str]]:
    """Each session's marker → the accounts (key suffixes) its requests reached, in order."""

    out: dict[str, list[str]] = {m: [] for m in markers}
    for request in received(mock):
        text = json.dumps(request["body"])
        owners = [m for m in markers if m in text]
        assert len(owners) <= 1
        if owners:
            out[owners[0]].append(request["key_suffix"])
    return out


Turn = Callable[[int, str], None]  # (turn number, the session's marker) → one request


def claude_code_like(gateway: Server, model: str) -> Callable[[str], Turn]:
    """Claude Code's shape: the session header, the whole conversation resent each turn."""

    def session(marker: str) -> Turn:
        client = clients.anthropic_client(gateway.url, CLIENT_KEY,
                                          default_headers={"X-Claude-Code-Session-Id": str(uuid.uuid4())})
        history: list[dict[str, Any]] = []

        def turn(n: int, marker: str) -> None:
            history.append({"role": "user", "content": f"{marker} turn {n}"})
            reply = client.messages.create(model=model, max_tokens=50, messages=history)
            history.append({"role": "assistant", "content": reply.content[0].text})  # type: ignore[union-attr]

        return turn

    return session


def codex_like(gateway: Server, model: str) -> Callable[[str], Turn]:
    """Codex's shape: ``store: false``, the conversation resent, ``prompt_cache_key`` its thread."""

    def session(marker: str) -> Turn:
        client = clients.openai_client(gateway.url, CLIENT_KEY)
        thread = str(uuid.uuid4())
        items: list[Any] = []

        def turn(n: int, marker: str) -> None:
            items.append({"role": "user", "content": f"{marker} turn {n}"})
            reply = client.responses.create(model=model, input=items, store=False, prompt_cache_key=thread)
            items.append({"role": "assistant", "content": reply.output_text})

        return turn

    return session


def chained(gateway: Server, model: str) -> Callable[[str], Turn]:
    """openai-agents' shape: each turn names the previous response; only the new input is sent."""

    def session(marker: str) -> Turn:
        client = clients.openai_client(gateway.url, CLIENT_KEY)
        previous: list[str] = []

        def turn(n: int, marker: str) -> None:
            reply = client.responses.create(model=model, input=f"{marker} turn {n}",
                                            **({"previous_response_id": previous[-1]} if previous else {}))
            previous.append(reply.id)

        return turn

    return session


def plain_chat(gateway: Server, model: str) -> Callable[[str], Turn]:
    """A Chat client that sends no session hint at all: the conversation's first message names it."""

    def session(marker: str) -> Turn:
        client = clients.openai_client(gateway.url, CLIENT_KEY)
        history: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]

        def turn(n: int, marker: str) -> None:
            history.append({"role": "user", "content": f"{marker} turn {n}"})
            reply = client.chat.completions.create(model=model, messages=history)  # type: ignore[arg-type]
            history.append({"role": "assistant", "content": reply.choices[0].message.content})

        return turn

    return session


KINDS = {
    "claude-code→anthropic": (claude_code_like, "up-anthropic/mock-text"),
    "claude-code→chat": (claude_code_like, "up-openai_chat/mock-text"),
    "codex→responses": (codex_like, "up-responses/mock-text"),
    "codex→anthropic": (codex_like, "up-anthropic/mock-text"),
    "previous_response_id→responses": (chained, "up-responses/mock-text"),
    "plain-chat→chat": (plain_chat, "up-openai_chat/mock-text"),
    "plain-chat→responses": (plain_chat, "up-responses/mock-text"),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_turn_of_a_session_lands_on_one_account_and_sessions_spread(five: dict[str, Any], gateway: Server,
                                                                         mock_upstream: Server, kind: str) -> None:
    make, model = KINDS[kind]
    began = timezone.now()  # another case's rows of the same model may still be arriving
    markers = [f"S{i}-{uuid.uuid4().hex[:10]}" for i in range(SESSIONS)]
    sessions = [make(gateway, model)(m) for m in markers]
    for n in range(TURNS):  # interleaved: turn n of every session, then turn n + 1
        for marker, turn in zip(markers, sessions):
            turn(n, marker)
    where = homes(mock_upstream, markers)
    assert all(len(accounts) == TURNS for accounts in where.values()), where
    assert all(len(set(accounts)) == 1 for accounts in where.values()), where
    assert len({accounts[0] for accounts in where.values()}) == SESSIONS, where  # one account each: spread
    rows = RequestLog.objects.filter(model_requested=model, status=200, created_at__gte=began).order_by("created_at")
    deadline = time.monotonic() + 5
    while rows.count() < SESSIONS * TURNS and time.monotonic() < deadline:
        time.sleep(0.05)
    decisions = [r.affinity for r in rows]
    assert decisions.count("assigned") == SESSIONS and decisions.count("kept") == SESSIONS * (TURNS - 1), decisions


def test_a_claude_code_session_sent_to_an_openai_upstream_carries_its_digest_as_prompt_cache_key(
        five: dict[str, Any], gateway: Server, mock_upstream: Server) -> None:
    raw = str(uuid.uuid4())
    client = clients.anthropic_client(gateway.url, CLIENT_KEY, default_headers={"X-Claude-Code-Session-Id": raw})
    for upstream in ("openai_chat", "responses"):
        client.messages.create(model=f"up-{upstream}/mock-text", max_tokens=20,
                               messages=[{"role": "user", "content": "hi"}])
    keys = [r["body"].get("prompt_cache_key") for r in received(mock_upstream)[-2:]]
    assert keys[0] == keys[1] and isinstance(keys[0], str) and len(keys[0]) == 32
    assert raw not in json.dumps(received(mock_upstream)[-2:])  # the client's own id never leaves


def rl_pool(mock: Server, gateway: Server, upstream: str, keys: list[str]) -> None:
    load(pool_config(mock, {upstream: keys}))
    seen(gateway)
    httpx.post(mock.url + "/_mock/reset")


def row_of(model: str, n: int) -> list[RequestLog]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        rows = list(RequestLog.objects.filter(model_requested=model).order_by("created_at"))
        if len(rows) >= n:
            return rows
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} rows for {model}")


def test_a_session_moves_before_its_account_runs_out_and_no_upstream_429_is_met(
        transactional_db: Any, gateway: Server, mock_upstream: Server) -> None:
    # Two requests a minute per account, as their answers' headers say.
    rl_pool(mock_upstream, gateway, "anthropic", [f"sk-good-rl2r-{i}-abcd{i}" for i in range(3)])
    model = f"up-anthropic/mock-text-{uuid.uuid4().hex[:6]}"
    client = clients.anthropic_client(gateway.url, CLIENT_KEY, default_headers={"X-Claude-Code-Session-Id": "s-1"})
    history: list[dict[str, Any]] = []
    for n in range(4):
        history.append({"role": "user", "content": f"turn {n}"})
        reply = client.messages.create(model=model, max_tokens=20, messages=history)
        history.append({"role": "assistant", "content": reply.content[0].text})  # type: ignore[union-attr]
    accounts = [r["key_suffix"] for r in received(mock_upstream)]
    assert len(accounts) == 4 and accounts[0] == accounts[1] and accounts[2] == accounts[3] != accounts[0]
    assert httpx.get(mock_upstream.url + "/_mock/ratelimits").json()["refused"] == 0
    rows = row_of(model, 4)
    assert [(r.affinity, r.affinity_reason) for r in rows] == [
        ("assigned", ""), ("kept", ""), ("moved", "quota"), ("kept", "")]
    assert rows[0].session_signal == "x-claude-code-session-id"
    assert all(len(r.attempts) == 1 for r in rows)


@pytest.mark.parametrize("client_proto", ["anthropic", "openai_chat"])
def test_with_every_account_out_the_client_gets_429_at_the_soonest_reset_without_an_upstream_call(
        transactional_db: Any, gateway: Server, mock_upstream: Server, client_proto: str) -> None:
    rl_pool(mock_upstream, gateway, "openai_chat", [f"sk-good-rl1r-{i}-wxyz{i}" for i in range(2)])
    model = f"up-openai_chat/mock-text-{uuid.uuid4().hex[:6]}"

    def ask(n: int) -> httpx.Response:
        if client_proto == "anthropic":
            return httpx.post(gateway.url + "/v1/messages", headers={"x-api-key": CLIENT_KEY}, json={
                "model": model, "max_tokens": 20, "messages": [{"role": "user", "content": f"question {n}"}]})
        return httpx.post(gateway.url + "/v1/chat/completions", headers={"authorization": f"Bearer {CLIENT_KEY}"},
                          json={"model": model, "messages": [{"role": "user", "content": f"question {n}"}]})

    assert [ask(n).status_code for n in range(2)] == [200, 200]  # one on each account
    sent = len(received(mock_upstream))
    refused = ask(2)
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    body = refused.json()
    if client_proto == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == "rate_limit_error"
    else:
        assert body["error"]["type"] == "rate_limit_error"
    assert len(received(mock_upstream)) == sent  # no account was tried
    assert row_of(model, 3)[-1].error_class == "pool_quota"
