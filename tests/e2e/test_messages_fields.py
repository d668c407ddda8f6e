"""What Claude Code's gateway protocol asks of /v1/messages beyond the passthrough, from outside: auto
mode's ``safeguards``, request tags and the billing group, pings in silent gaps, Anthropic's model
list for a bearer caller, and a chunked body without its length."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from accounts.config_file import load
from accounts.models import RequestLog
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, own_gateway, received, seen

pytestmark = pytest.mark.django_db(transaction=True)

HI = [{"role": "user", "content": "hi"}]
SAFEGUARDS_BETA = "auto-mode-classifier-2026-07-16"
TAGS_BETA = "request-tags-2026-08-21"


@pytest.fixture(scope="module")
def tagging_gateway(django_db_setup: Any, django_db_blocker: Any, mock_upstream: Server) -> Iterator[Server]:
    with own_gateway(django_db_blocker, {"GATEWAY_BILLING_GROUP_TAG": "project"}) as server:
        yield server


def post(gateway: Server, body: dict[str, Any], betas: list[str] = (), **headers: str) -> httpx.Response:  # type: ignore[assignment]
    sent = {"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01", **headers}
    if betas:
        sent["anthropic-beta"] = ",".join(betas)
    return httpx.post(gateway.url + "/v1/messages", json=body, headers=sent, timeout=30)


def last_received(mock: Server, marker: str) -> dict[str, Any]:
    found = [r for r in received(mock) if marker in str(r.get("body"))]
    assert found, f"nothing with {marker} reached the upstream"
    return found[-1]


def test_safeguards_and_their_beta_reach_an_anthropic_upstream_unchanged(pool: Any, gateway: Server,
                                                                        mock_upstream: Server) -> None:
    marker = uuid.uuid4().hex
    body = {"model": "up-anthropic/mock-text", "max_tokens": 20, "messages": [{"role": "user", "content": marker}],
            "safeguards": {"mode": "auto", "id": marker}}
    answer = post(gateway, body, ["claude-code-20250219", SAFEGUARDS_BETA])
    assert answer.status_code == 200, answer.text  # the mock refuses safeguards without its beta, as the API does
    upstream = last_received(mock_upstream, marker)
    assert upstream["body"]["safeguards"] == {"mode": "auto", "id": marker}
    assert SAFEGUARDS_BETA in upstream["headers"]["anthropic-beta"]


@pytest.mark.parametrize("model", ["up-openai_chat/mock-text", "up-responses/mock-text"])
def test_safeguards_on_a_translated_route_are_a_400_naming_them_with_nothing_sent(
        pool: Any, gateway: Server, mock_upstream: Server, model: str) -> None:
    marker = uuid.uuid4().hex
    with pytest.raises(anthropic.BadRequestError) as refused:
        anthropic.Anthropic(base_url=gateway.url, api_key=CLIENT_KEY, max_retries=0).messages.create(
            model=model, max_tokens=20, messages=[{"role": "user", "content": marker}],
            extra_body={"safeguards": {"mode": "auto"}}, extra_headers={"anthropic-beta": SAFEGUARDS_BETA})
    body = refused.value.body
    assert isinstance(body, dict) and body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith("safeguards: ")
    assert not [r for r in received(mock_upstream) if marker in str(r.get("body"))]


def test_request_tags_pass_to_an_upstream_that_takes_them_and_are_left_out_where_it_does_not(
        gateway: Server, mock_upstream: Server) -> None:
    config = pool_config(mock_upstream)
    config["providers"].append({**config["providers"][1], "name": "no-tags", "accepts_request_tags": False})
    load(config)
    seen(gateway)
    for provider, takes in (("up-anthropic", True), ("no-tags", False)):
        marker = uuid.uuid4().hex
        body = {"model": f"{provider}/mock-text", "max_tokens": 20, "messages": [{"role": "user", "content": marker}],
                "tags": {"project": "atlas"}}
        answer = post(gateway, body, ["claude-code-20250219", TAGS_BETA])
        assert answer.status_code == 200, answer.text
        upstream = last_received(mock_upstream, marker)
        assert ("tags" in upstream["body"]) is takes
        assert (TAGS_BETA in upstream["headers"].get("anthropic-beta", "")) is takes
        assert "claude-code-20250219" in upstream["headers"]["anthropic-beta"]


def test_the_billing_group_tag_is_kept_on_the_log_row(pool: Any, tagging_gateway: Server) -> None:
    marker = uuid.uuid4().hex[:8]
    body = {"model": f"up-anthropic/mock-text-{marker}", "max_tokens": 20, "messages": HI,
            "tags": {"project": "atlas", "other": "x"}}
    assert post(tagging_gateway, body, [TAGS_BETA]).status_code == 200
    deadline = time.monotonic() + 10
    while not (rows := list(RequestLog.objects.filter(model_requested=body["model"]))) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [row.billing_group for row in rows] == ["atlas"]


def test_silent_gaps_in_an_anthropic_stream_carry_ping_events(pool: Any, gateway: Server) -> None:
    """Claude Code's stream watchdog resets on bytes; Anthropic's own ping events are what its API
    sends in a gap (and what a client counting events sees): the gateway sends them once the stream
    has begun (message_start out), on a passthrough and on a translated route alike."""

    for model in ("up-anthropic/mock-slow-3x1600", "up-openai_chat/mock-slow-3x1600"):
        with httpx.stream("POST", gateway.url + "/v1/messages", timeout=30,
                          headers={"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"},
                          json={"model": model, "max_tokens": 50, "messages": HI, "stream": True}) as resp:
            raw = resp.read()
        events = [block.split(b"\n", 1)[0] for block in raw.split(b"\n\n") if block.strip()]
        assert events[0] == b"event: message_start", raw[:300]
        assert b"event: ping" in events, (model, raw[:1500])
        assert b": keepalive" not in raw  # a comment only before message_start
        assert events[-1] == b"event: message_stop"
        # ...and the official SDK reads the stream as ever.
    text = anthropic.Anthropic(base_url=gateway.url, api_key=CLIENT_KEY, max_retries=0).messages.create(
        model="up-anthropic/mock-slow-3x1600", max_tokens=50, messages=HI, stream=True)
    assert [e.type for e in text][-1] == "message_stop"


def test_a_bearer_caller_gets_anthropics_model_list(pool: Any, gateway: Server) -> None:
    listed = httpx.get(gateway.url + "/v1/models", headers={"authorization": f"Bearer {CLIENT_KEY}",
                                                            "anthropic-version": "2023-06-01"})
    assert listed.status_code == 200
    page = listed.json()
    assert set(page) == {"data", "has_more", "first_id", "last_id"}
    assert page["data"] and all(m["type"] == "model" and m["display_name"] for m in page["data"])


def test_a_chunked_messages_body_without_its_length_is_a_411(pool: Any, gateway: Server) -> None:
    payload = b'{"model": "up-anthropic/mock-text", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}'
    head = (f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: {CLIENT_KEY}\r\n"
            "content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n").encode()
    chunked = f"{len(payload):x}\r\n".encode() + payload + b"\r\n0\r\n\r\n"
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
        sock.sendall(head + chunked)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            piece = sock.recv(65536)
            if not piece:
                break
            answer += piece
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.split()[1] == b"411", answer[:500]
    assert b'"type":"error"' in rest and b"Content-Length" in rest
    # With its length the same body is served.
    assert post(gateway, {"model": "up-anthropic/mock-text", "max_tokens": 5, "messages": HI}).status_code == 200
