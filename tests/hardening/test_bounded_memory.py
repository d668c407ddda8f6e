"""A hostile upstream or a slow client cannot make the gateway hold hundreds of megabytes.

Each case sends (or would receive) 200 MB; the gateway process's peak resident memory (VmHWM)
may grow by at most 50 MB, and the client gets a correct end in its own protocol.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from accounts.config_file import load
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, own_gateway

pytestmark = pytest.mark.django_db(transaction=True)

MB = 1024 * 1024
GROWTH = 50 * MB


@pytest.fixture(scope="module")
def bounded_gateway(django_db_setup: Any, django_db_blocker: Any, mock_upstream: Server) -> Iterator[Server]:
    """A gateway of these tests only, so that its memory is theirs."""

    with own_gateway(django_db_blocker, {"LOG_LEVEL": "ERROR"}) as server:
        yield server


@pytest.fixture(scope="module")
def loose_gateway(django_db_setup: Any, django_db_blocker: Any, mock_upstream: Server) -> Iterator[Server]:
    """One whose bounds on an answer's size are far away: only the read-ahead can hold memory down."""

    with own_gateway(django_db_blocker, {"LOG_LEVEL": "ERROR", "GATEWAY_MAX_UPSTREAM_BYTES": str(1024 * MB),
                                         "GATEWAY_MAX_ANSWER_CHARS": str(1024 * MB)}) as server:
        yield server


@pytest.fixture
def pool(transactional_db: Any, mock_upstream: Server, bounded_gateway: Server) -> None:
    load(pool_config(mock_upstream))
    httpx.post(mock_upstream.url + "/_mock/reset")


def peak_rss(server: Server) -> int:
    with open(f"/proc/{server.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def stream(server: Server, path: str, body: dict[str, Any], read_per_second: int | None = None,
           seconds: float = 60) -> bytes:
    """The streamed answer (all of it, or what a client reading ``read_per_second`` got in ``seconds``)."""

    got = bytearray()
    headers = {"authorization": f"Bearer {CLIENT_KEY}"}
    started = time.monotonic()
    with httpx.stream("POST", server.url + path, json=body, headers=headers, timeout=60) as response:
        assert response.status_code == 200
        for chunk in response.iter_raw(4096 if read_per_second else 65536):
            got += chunk
            if read_per_second:
                time.sleep(len(chunk) / read_per_second)
                if time.monotonic() - started > seconds:
                    break
    return bytes(got)


def test_an_endless_upstream_line_ends_the_stream_in_protocol_without_holding_it(
        pool: None, bounded_gateway: Server) -> None:
    before = peak_rss(bounded_gateway)
    body = {"model": "up-openai_chat/mock-huge-line-200", "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}
    out = stream(bounded_gateway, "/v1/chat/completions", body)
    assert out.rstrip().endswith(b"data: [DONE]")
    assert b'"error"' in out and b"upstream" in out
    assert peak_rss(bounded_gateway) - before <= GROWTH


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"model": "up-openai_chat/mock-huge-210", "stream": True,
                              "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/messages", {"model": "up-openai_chat/mock-huge-210", "stream": True, "max_tokens": 10,
                      "messages": [{"role": "user", "content": "hi"}]}),
], ids=["passed-through", "translated"])
def test_a_slow_client_holds_the_upstream_back(pool: None, loose_gateway: Server, mock_upstream: Server,
                                               path: str, body: dict[str, Any]) -> None:
    before = peak_rss(loose_gateway)
    got = stream(loose_gateway, path, body, read_per_second=35_000, seconds=3)
    sent_upstream = httpx.get(mock_upstream.url + "/_mock/stats").json()["bytes_streamed"]
    assert 60_000 < len(got) < 300_000
    # What the upstream could write: the client's share, the gateway's read-ahead and socket buffers.
    assert sent_upstream < 20 * MB, sent_upstream
    assert peak_rss(loose_gateway) - before <= GROWTH


@pytest.mark.parametrize("path, body, ending", [
    ("/v1/responses", {"model": "up-openai_chat/mock-huge-200", "stream": True, "input": "hi"},
     b"event: response.failed"),
    ("/v1/messages", {"model": "up-openai_chat/mock-huge-200", "stream": True, "max_tokens": 10,
                      "messages": [{"role": "user", "content": "hi"}]}, b"event: message_stop"),
    ("/v1/chat/completions", {"model": "up-responses/mock-huge-200", "stream": True,
                              "messages": [{"role": "user", "content": "hi"}]}, b"data: [DONE]"),
], ids=["chat-to-responses", "chat-to-anthropic", "responses-to-chat"])
def test_a_huge_translated_answer_is_cut_at_the_bound(pool: None, bounded_gateway: Server, path: str,
                                                    body: dict[str, Any], ending: bytes) -> None:
    before = peak_rss(bounded_gateway)
    out = stream(bounded_gateway, path, body)
    end = out.rfind(ending)
    assert end > out.rfind(b"delta")  # the protocol's ending, after the last delta
    assert b"the upstream's answer exceeds" in out[out.rfind(b"delta"):]
    # At the bound on an answer's text (2 Mi characters): the 200 MB answer once became 1 GB.
    assert len(out) < 20 * MB
    assert peak_rss(bounded_gateway) - before <= GROWTH


def test_a_huge_json_answer_is_refused_within_the_bound(pool: None, bounded_gateway: Server) -> None:
    before = peak_rss(bounded_gateway)
    response = httpx.post(bounded_gateway.url + "/v1/chat/completions", timeout=60,
                          headers={"authorization": f"Bearer {CLIENT_KEY}"},
                          json={"model": "up-openai_chat/mock-huge-200",
                                "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code in (502, 503) and response.json()["error"]["message"]
    assert peak_rss(bounded_gateway) - before <= GROWTH
