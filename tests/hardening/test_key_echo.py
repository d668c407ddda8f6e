"""An upstream error that echoes the account's key, JSON-escaped (``\\/`` for ``/``, ``\\uXXXX``), never
reaches the client readable: on each same-protocol path (chat, messages, responses, count_tokens, compact,
the Responses websocket), where the upstream's own error body is what the client gets.

The scripted upstream's ``fail-400-echo-key`` answers 400 with the key it was sent in its message,
every second character ``\\uXXXX`` and ``/`` as ``\\/``: a client decoding the JSON reads the key.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from accounts.config_file import load
from mockupstream.scenarios import escaped_key
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def echoing_pool(pool: Any, mock_upstream: Server) -> str:
    """Every provider's one account answers with its own key echoed; returns the key's random part."""

    tail = uuid.uuid4().hex
    keys = {proto: [f"sk-fail-400-echo-key/{proto}/{tail}"] for proto in ("openai_chat", "anthropic", "responses")}
    load(pool_config(mock_upstream, keys))
    return tail


def assert_no_key(raw: bytes, tail: str) -> dict[str, Any]:
    """The answer, JSON decoded (twice where a string holds JSON), holds no spelling of the key."""

    body = json.loads(raw)
    assert isinstance(body, dict)
    decoded = json.dumps(body, ensure_ascii=False)
    assert tail not in decoded and tail not in raw.decode()
    for proto in ("openai_chat", "anthropic", "responses"):
        assert escaped_key(f"sk-fail-400-echo-key/{proto}/{tail}") not in raw
    assert "[redacted]" in decoded  # the message is there, the key is not
    return body


BODIES = {
    "/v1/chat/completions": {"model": "up-openai_chat/mock-text", "messages": [{"role": "user", "content": "hi"}]},
    "/v1/messages": {"model": "up-anthropic/mock-text", "max_tokens": 20,
                     "messages": [{"role": "user", "content": "hi"}]},
    "/v1/messages/count_tokens": {"model": "up-anthropic/mock-text", "messages": [{"role": "user", "content": "hi"}]},
    "/v1/responses": {"model": "up-responses/mock-text", "input": "hi"},
    "/v1/responses/compact": {"model": "up-responses/mock-text",
                              "input": [{"type": "message", "role": "user", "content": "hi"}]},
}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("path", list(BODIES))
def test_an_upstream_error_echoing_the_escaped_key_reaches_no_client_readable(
        echoing_pool: str, gateway: Server, path: str, stream: bool) -> None:
    if stream and path.endswith(("count_tokens", "compact")):
        pytest.skip("no stream on this path")
    body = {**BODIES[path], **({"stream": True} if stream else {})}
    answer = httpx.post(gateway.url + path, json=body, timeout=30,
                        headers={"authorization": f"Bearer {CLIENT_KEY}", "x-api-key": CLIENT_KEY})
    assert answer.status_code == 400, answer.text
    assert_no_key(answer.content, echoing_pool)


def test_the_websocket_error_frame_holds_no_spelling_of_the_key(echoing_pool: str, gateway: Server) -> None:
    url = gateway.url.replace("http://", "ws://") + "/v1/responses"
    with connect(url, additional_headers={"Authorization": f"Bearer {CLIENT_KEY}"}, open_timeout=10) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "up-responses/mock-text", "input": "hi"}))
        frame = ws.recv(timeout=15)
    assert isinstance(frame, str)
    body = assert_no_key(frame.encode(), echoing_pool)
    assert body["type"] == "error" and body["status"] == 400
