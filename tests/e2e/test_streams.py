"""Streams that never hang: odd upstreams, dying upstreams, slow upstreams and vanishing clients."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY
from tests.servers import Server, own_gateway
from translation.sse import SSEEvent, SSEParser

pytestmark = pytest.mark.django_db(transaction=True)

HEADERS = {"authorization": f"Bearer {CLIENT_KEY}"}
PATHS = {"openai_chat": "/v1/chat/completions", "anthropic": "/v1/messages", "responses": "/v1/responses"}


def body_for(client_proto: str, model: str) -> dict[str, Any]:
    if client_proto == "openai_chat":
        return {"model": model, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    if client_proto == "anthropic":
        return {"model": model, "stream": True, "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    return {"model": model, "stream": True, "input": "hi"}


def raw_stream(gateway: Server, client_proto: str, model: str) -> tuple[httpx.Response, list[SSEEvent], bytes]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    chunks: list[bytes] = []
    with httpx.stream("POST", gateway.url + PATHS[client_proto], json=body_for(client_proto, model),
                      headers=HEADERS, timeout=30) as resp:
        for chunk in resp.iter_raw():
            chunks.append(chunk)
            events.extend(parser.feed(chunk))
    events.extend(parser.finish())
    return resp, events, b"".join(chunks)


def assert_terminated(client_proto: str, events: list[SSEEvent], failed: bool) -> None:
    """The stream ends with its protocol's terminator; ``failed`` says whether it must be the error ending."""

    assert events, "no events at all"
    last = events[-1]
    if client_proto == "openai_chat":
        assert last.data == "[DONE]"
        final = events[-2].data
        assert ('"error"' in final) == failed
        assert '"finish_reason":null' not in final
    elif client_proto == "anthropic":
        assert last.event == "message_stop"
        assert any(e.event == "error" for e in events) == failed
    else:
        assert last.event == ("response.failed" if failed else "response.completed")


UPSTREAMS = ["openai_chat", "anthropic", "responses"]
CLIENTS = ["openai_chat", "anthropic", "responses"]


@pytest.mark.parametrize("client_proto", CLIENTS)
def test_nonstandard_chat_upstream_is_normalised(pool: Any, gateway: Server, client_proto: str) -> None:
    resp, events, _ = raw_stream(gateway, client_proto, "up-openai_chat/mock-nonstandard")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/event-stream")
    assert resp.headers["cache-control"] == "no-cache"
    assert resp.headers["x-accel-buffering"] == "no"
    assert_terminated(client_proto, events, failed=False)


def test_nonstandard_chat_upstream_through_the_sdks(pool: Any, gateway: Server) -> None:
    c = clients.openai_client(gateway.url, CLIENT_KEY)
    out = clients.chat_call(c, "up-openai_chat/mock-nonstandard", [{"role": "user", "content": "hi"}], stream=True)
    assert out.text and out.finish == "stop"
    a = clients.anthropic_client(gateway.url, CLIENT_KEY)
    out = clients.messages_call(a, "up-openai_chat/mock-nonstandard", [{"role": "user", "content": "hi"}], stream=True)
    assert out.text and out.finish == "stop"


@pytest.mark.parametrize("scenario", ["mock-truncated", "mock-disconnect", "mock-malformed"])
@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("client_proto", CLIENTS)
def test_broken_upstream_ends_the_stream_cleanly(pool: Any, gateway: Server, client_proto: str, upstream: str,
                                                 scenario: str) -> None:
    resp, events, _ = raw_stream(gateway, client_proto, f"up-{upstream}/{scenario}")
    assert resp.status_code == 200
    assert_terminated(client_proto, events, failed=True)


@pytest.mark.parametrize("client_proto", CLIENTS)
def test_sdk_sees_an_error_not_a_hang_when_the_upstream_dies(pool: Any, gateway: Server, client_proto: str) -> None:
    model = "up-anthropic/mock-disconnect"
    msgs = [{"role": "user", "content": "hi"}]
    # The Responses helper reports a stream that ended in response.failed as a RuntimeError,
    # exactly as it does for OpenAI's own failed responses.
    with pytest.raises((openai.APIError, anthropic.APIError, RuntimeError)):
        if client_proto == "openai_chat":
            clients.chat_call(clients.openai_client(gateway.url, CLIENT_KEY), model, msgs, stream=True)
        elif client_proto == "anthropic":
            clients.messages_call(clients.anthropic_client(gateway.url, CLIENT_KEY), model, msgs, stream=True)
        else:
            clients.responses_call(clients.openai_client(gateway.url, CLIENT_KEY), model, msgs, stream=True)


@pytest.mark.slow  # the provider's 3 s idle timeout, each (tests/gateway/test_relay.py has it in milliseconds)
@pytest.mark.parametrize("client_proto", CLIENTS)
def test_stalled_upstream_is_cut_at_its_idle_timeout(pool: Any, gateway: Server, client_proto: str) -> None:
    started = time.monotonic()
    resp, events, _ = raw_stream(gateway, client_proto, "up-openai_chat/mock-stall")
    # The provider's idle timeout is 5 s in the test pool; the upstream would stay silent for 120 s.
    assert time.monotonic() - started < 30
    assert_terminated(client_proto, events, failed=True)


@pytest.mark.parametrize("client_proto", CLIENTS)
def test_keepalive_bytes_arrive_before_the_first_token(pool: Any, gateway: Server, client_proto: str) -> None:
    # The upstream waits 2.5 s before its first event; the e2e gateway's keepalive interval is 1 s.
    first_comment_at = first_data_at = None
    started = time.monotonic()
    with httpx.stream("POST", gateway.url + PATHS[client_proto],
                      json=body_for(client_proto, "up-openai_chat/mock-delay-2500"),
                      headers=HEADERS, timeout=30) as resp:
        buf = b""
        for chunk in resp.iter_raw():
            now = time.monotonic() - started
            buf += chunk
            if first_comment_at is None and b": keepalive" in chunk:
                first_comment_at = now
            if b"data:" in chunk and first_data_at is None:
                first_data_at = now
    assert first_comment_at is not None, buf[:500]
    assert first_data_at is not None
    assert first_comment_at < first_data_at


DRAIN = 0.5  # GATEWAY_ABANDONED_STREAM_SECONDS of the gateway below


@pytest.fixture(scope="module")
def draining_gateway(django_db_setup: Any, django_db_blocker: Any, mock_upstream: Server) -> Iterator[Server]:
    with own_gateway(django_db_blocker, {"GATEWAY_ABANDONED_STREAM_SECONDS": str(DRAIN)}) as server:
        yield server


@pytest.mark.parametrize("client_proto", CLIENTS)
def test_client_disconnect_closes_the_upstream_connection(pool: Any, draining_gateway: Server,
                                                          mock_upstream: Server, client_proto: str) -> None:
    """Once the upstream has been read on for its usage as long as the gateway does (a 20 s answer
    does not bring it within that)."""

    httpx.post(mock_upstream.url + "/_mock/reset")
    with httpx.stream("POST", draining_gateway.url + PATHS[client_proto],
                      json=body_for(client_proto, "up-openai_chat/mock-slow-400x50"),
                      headers=HEADERS, timeout=30) as resp:
        got = 0
        for chunk in resp.iter_raw():
            got += chunk.count(b"data:")
            if got >= 5:
                break
    closed_at = time.monotonic()
    deadline = closed_at + 5
    stats: dict[str, Any] = {}
    while time.monotonic() < deadline:
        stats = httpx.get(mock_upstream.url + "/_mock/stats").json()
        if stats["streams_cancelled"] >= 1:
            break
        time.sleep(0.05)
    assert stats["streams_cancelled"] == 1, stats
    assert time.monotonic() - closed_at < DRAIN + 1.0
