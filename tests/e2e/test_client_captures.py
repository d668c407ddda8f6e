"""Every request today's agent clients send (tests/fixtures/clients/) is answered, on every upstream protocol.

Each captured request is sent as captured — body and headers, Claude Code's to
``/v1/messages?beta=true`` — with only the model changed to route it, and must be
answered with a complete stream. The scripted upstream's Anthropic side refuses
beta-only fields whose beta its ``anthropic-beta`` header does not name, so the
Anthropic run also proves the header was forwarded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import CLIENT_KEY
from tests.servers import Server, received
from translation.sse import SSEParser

pytestmark = pytest.mark.django_db(transaction=True)

CAPTURES = Path(__file__).parents[1] / "fixtures" / "clients"
TERMINATOR = {"/v1/messages": "message_stop", "/v1/responses": "response.completed"}
# Headers a client computes for its own transport; httpx sets them for this request itself.
TRANSPORT = {"content-length", "accept-encoding", "host", "connection"}


def captured() -> list[tuple[str, int, dict[str, Any]]]:
    out = []
    for path in sorted(CAPTURES.glob("*.json")):
        doc = json.loads(path.read_text())
        for i, req in enumerate(doc["requests"]):
            out.append((f"{doc['client']}-{doc['version']}", i, req))
    return out


@pytest.mark.parametrize("upstream", ["openai_chat", "anthropic", "responses"])
@pytest.mark.parametrize("name,index,req", captured(), ids=lambda v: str(v) if not isinstance(v, dict) else "")
def test_a_captured_client_request_is_answered_with_a_complete_stream(
        pool: Any, gateway: Server, mock_upstream: Server, upstream: str, name: str, index: int,
        req: dict[str, Any]) -> None:
    body = {**req["body"], "model": f"up-{upstream}/mock-tool"}
    headers = {k: v for k, v in req["headers"].items() if k.lower() not in TRANSPORT}
    headers["authorization"] = f"Bearer {CLIENT_KEY}"
    if req["path"] == "/v1/messages":
        headers["x-api-key"] = CLIENT_KEY
    url = gateway.url + req["path"] + ("?beta=true" if req["path"] == "/v1/messages" else "")
    parser = SSEParser()
    with httpx.stream("POST", url, json=body, headers=headers, timeout=30) as resp:
        raw = resp.read()
    assert resp.status_code == 200, raw[:2000]
    events = parser.feed(raw) + parser.finish()
    names = [e.event for e in events]
    assert TERMINATOR[req["path"]] in names, raw[-2000:]
    assert "error" not in names and "response.failed" not in names
    sent = received(mock_upstream)[-1]
    assert sent["body"]["stream"] is True
    if upstream == "anthropic" and req["path"] == "/v1/messages":
        # Same protocol: the client's betas and the fields they unlock arrive as the client sent them.
        assert sent["headers"]["anthropic-beta"] == req["headers"]["anthropic-beta"]
        assert sent["body"]["context_management"] == req["body"]["context_management"]
        assert [m["role"] for m in sent["body"]["messages"]] == [m["role"] for m in req["body"]["messages"]]
