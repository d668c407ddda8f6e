"""Scenarios that only the raw bytes show: cut, stalled, slow and non-standard streams."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from mockupstream import scenarios
from translation import sse

from .clients import openai_client

KEY = "sk-mock-wire-test-7f3a"
AUTH = {"Authorization": f"Bearer {KEY}"}
MESSAGES = [{"role": "user", "content": "hi"}]
BODIES: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {"messages": MESSAGES},
    "/v1/messages": {"max_tokens": 100, "messages": MESSAGES},
    "/v1/responses": {"input": "hi"},
}
PATHS = list(BODIES)
# What only a properly finished stream of each protocol contains.
FINISHED = {"/v1/chat/completions": b"data: [DONE]", "/v1/messages": b"event: message_stop",
            "/v1/responses": b"event: response.completed"}


def body(path: str, model: str, stream: bool = True) -> dict[str, Any]:
    return {**BODIES[path], "model": model, "stream": stream}


def events_of(wire: bytes) -> list[sse.SSEEvent]:
    parser = sse.SSEParser()
    return parser.feed(wire) + parser.finish()


def text_in(path: str, wire: bytes) -> str:
    """The text deltas of a (possibly cut) stream, read from each protocol's delta events."""

    out = ""
    for event in events_of(wire):
        if event.data == "[DONE]" or event.data.startswith("{not"):
            continue
        data = sse.loads(event.data)
        if path == "/v1/chat/completions":
            choices = data.get("choices") or [{"delta": {}}]
            out += choices[0]["delta"].get("content") or ""
        elif event.event == "content_block_delta" and data["delta"]["type"] == "text_delta":
            out += data["delta"]["text"]
        elif event.event == "response.output_text.delta":
            out += data["delta"]
    return out


def wait_for_stats(http: httpx.Client, **expected: int) -> dict[str, Any]:
    deadline = time.monotonic() + 3
    while True:
        stats = http.get("/_mock/stats").json()
        if all(stats[k] == v for k, v in expected.items()) or time.monotonic() > deadline:
            return stats
        time.sleep(0.05)


@pytest.mark.parametrize("path", PATHS)
def test_stream_is_event_stream_and_finishes(path: str, http: httpx.Client) -> None:
    r = http.post(path, json=body(path, "mock-text"), headers=AUTH)
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/event-stream"
    assert FINISHED[path] in r.content
    assert text_in(path, r.content) == scenarios.HELLO


def test_anthropic_beta_query_is_accepted(http: httpx.Client) -> None:
    r = http.post("/v1/messages?beta=true", json=body("/v1/messages", "mock-text", False), headers=AUTH)
    assert r.status_code == 200 and r.json()["type"] == "message"


@pytest.mark.parametrize("path", PATHS)
def test_truncated_ends_the_body_cleanly_without_finish(path: str, http: httpx.Client) -> None:
    r = http.post(path, json=body(path, "mock-truncated"), headers=AUTH)
    assert r.status_code == 200
    assert text_in(path, r.content) == scenarios.HELLO
    for marker in (FINISHED[path], b"message_delta", b"response.incomplete", b"response.failed",
                   b'"finish_reason":"'):
        assert marker not in r.content


@pytest.mark.parametrize("path", PATHS)
def test_disconnect_drops_the_connection_mid_stream(path: str, http: httpx.Client) -> None:
    received = b""
    with pytest.raises(httpx.RemoteProtocolError):
        with http.stream("POST", path, json=body(path, "mock-disconnect"), headers=AUTH) as r:
            for chunk in r.iter_raw():
                received += chunk
    assert text_in(path, received) == "Hello! This is"
    assert FINISHED[path] not in received
    assert wait_for_stats(http, streams_open=0)["streams_completed"] == 1


@pytest.mark.parametrize("path", PATHS)
def test_disconnect_without_stream_gets_no_response(path: str, http: httpx.Client) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        http.post(path, json=body(path, "mock-disconnect", stream=False), headers=AUTH)


@pytest.mark.parametrize("path", PATHS)
def test_malformed_line_between_deltas(path: str, http: httpx.Client) -> None:
    r = http.post(path, json=body(path, "mock-malformed"), headers=AUTH)
    before, sep, after = r.content.partition(b"data: {not json\n\n")
    assert sep and text_in(path, before) == "Hello! This"
    assert text_in(path, after) == " is the mock upstream."
    assert FINISHED[path] in after


def test_nonstandard_chat_stream(http: httpx.Client) -> None:
    path = "/v1/chat/completions"
    r = http.post(path, json=body(path, "mock-nonstandard"), headers=AUTH)
    assert r.headers["connection"] == "close"
    chunks = [sse.loads(e.data) for e in events_of(r.content)]
    assert b"[DONE]" not in r.content
    assert {c["object"] for c in chunks} == {"chat.completion"} and {c["model"] for c in chunks} == {""}
    assert chunks[0]["id"].startswith("stream:chat:") and len({c["id"] for c in chunks}) == 1
    assert not any("role" in c["choices"][0]["delta"] for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert text_in(path, r.content) == scenarios.HELLO


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/responses"])
def test_nonstandard_elsewhere_is_plain_text(path: str, http: httpx.Client) -> None:
    r = http.post(path, json=body(path, "mock-nonstandard"), headers=AUTH)
    assert text_in(path, r.content) == scenarios.HELLO and FINISHED[path] in r.content


@pytest.mark.parametrize("path", PATHS)
def test_stall_goes_silent_and_counts_the_client_leaving(path: str, http: httpx.Client) -> None:
    with httpx.Client(base_url=http.base_url, timeout=httpx.Timeout(10, read=0.6)) as client:
        with client.stream("POST", path, json=body(path, "mock-stall"), headers=AUTH) as r:
            chunks = r.iter_raw()
            received = next(chunks)
            assert http.get("/_mock/stats").json()["streams_open"] == 1
            with pytest.raises(httpx.ReadTimeout):
                for chunk in chunks:
                    received += chunk
            assert text_in(path, received) == "Hello! This"
    stats = wait_for_stats(http, streams_open=0, streams_cancelled=1)
    assert (stats["streams_open"], stats["streams_cancelled"], stats["streams_completed"]) == (0, 1, 0)


def test_stall_without_stream_sends_nothing(http: httpx.Client) -> None:
    path = "/v1/chat/completions"
    with pytest.raises(httpx.ReadTimeout):
        http.post(path, json=body(path, "mock-stall", stream=False), headers=AUTH, timeout=0.5)


def test_client_leaving_a_slow_stream_is_counted_cancelled(http: httpx.Client) -> None:
    path = "/v1/responses"
    with http.stream("POST", path, json=body(path, "mock-slow-50x50"), headers=AUTH) as r:
        next(r.iter_raw())
    stats = wait_for_stats(http, streams_open=0, streams_cancelled=1)
    assert (stats["streams_cancelled"], stats["streams_completed"]) == (1, 0)


@pytest.mark.parametrize("path", PATHS)
def test_slow_stream_writes_each_delta_on_its_own(path: str, http: httpx.Client) -> None:
    arrivals: list[float] = []
    start = time.monotonic()
    with http.stream("POST", path, json=body(path, "mock-slow-5x100"), headers=AUTH) as r:
        wire = b""
        for chunk in r.iter_raw():
            wire += chunk
            arrivals.append(time.monotonic() - start)
    assert text_in(path, wire) == "The quick brown fox jumps"
    assert arrivals[-1] >= 0.4
    assert len([t for t in arrivals if t >= 0.09]) >= 4  # the later deltas arrive one by one


def test_default_slow_model_takes_64_deltas_20ms_apart(http: httpx.Client) -> None:
    path = "/v1/chat/completions"
    start = time.monotonic()
    r = http.post(path, json=body(path, "mock-slow"), headers=AUTH)
    assert time.monotonic() - start >= 63 * 0.02
    assert len(text_in(path, r.content).split(" ")) == 64


@pytest.mark.parametrize("path", PATHS)
def test_delay_sends_headers_then_waits(path: str, http: httpx.Client) -> None:
    start = time.monotonic()
    with http.stream("POST", path, json=body(path, "mock-delay-600"), headers=AUTH) as r:
        headers_at = time.monotonic() - start
        chunks = r.iter_raw()
        wire = next(chunks)
        first_at = time.monotonic() - start
        wire += b"".join(chunks)
    assert headers_at < 0.4 <= 0.6 <= first_at + 0.05
    assert text_in(path, wire) == scenarios.HELLO


def test_delay_without_stream_answers_late(http: httpx.Client) -> None:
    start = time.monotonic()
    r = http.post("/v1/responses", json=body("/v1/responses", "mock-delay-300", stream=False), headers=AUTH)
    assert r.status_code == 200 and time.monotonic() - start >= 0.3


# ----------------------------------------------------------------- requests and bodies


@pytest.mark.parametrize("path", PATHS)
def test_invalid_json_is_a_400_in_the_protocol_envelope(path: str, http: httpx.Client) -> None:
    r = http.post(path, content=b'{"model": ', headers={**AUTH, "content-type": "application/json"})
    assert r.status_code == 400
    err = r.json()
    assert (err["type"] == "error") if path == "/v1/messages" else ("message" in err["error"])


@pytest.mark.parametrize("path", PATHS)
def test_invalid_request_is_a_400_naming_the_field(path: str, http: httpx.Client) -> None:
    r = http.post(path, json={"model": "mock-text", "messages": "nope", "input": 5, "max_tokens": 5},
                  headers=AUTH)
    assert r.status_code == 400
    assert r.json()["error"]["message"]


@pytest.mark.parametrize("path", PATHS)
def test_model_that_is_not_a_string_is_a_400_not_a_crash(path: str, http: httpx.Client) -> None:
    for model in (["mock-text"], {"id": "mock-text"}):  # unhashable: no replay can be registered for them
        r = http.post(path, json={**BODIES[path], "model": model}, headers=AUTH)
        assert r.status_code == 400, model
        assert "model" in r.json()["error"]["message"]


def test_models_list_validates_with_the_openai_sdk(base_url: str) -> None:
    models = list(openai_client(base_url).models.list())
    assert [m.id for m in models] == scenarios.MODELS
    assert {m.owned_by for m in models} == {"mock"} and {m.object for m in models} == {"model"}


def test_stats_count_requests_streams_and_keys(http: httpx.Client) -> None:
    path = "/v1/chat/completions"
    http.post(path, json=body(path, "mock-text"), headers=AUTH)
    http.post(path, json=body(path, "mock-text", stream=False), headers=AUTH)
    http.post(path, json=body(path, "mock-text"), headers={"x-api-key": "sk-other-account-9999"})
    stats = wait_for_stats(http, streams_completed=2)
    streamed = stats.pop("bytes_streamed")
    cache = stats.pop("cache")  # each key's prompt cache (tests/mockupstream/test_promptcache.py)
    assert stats == {"requests": 3, "streams_open": 0, "streams_completed": 2, "streams_cancelled": 0,
                     "by_key": {"..." + KEY[-4:]: 2, "...9999": 1}}
    assert set(cache) == {"..." + KEY[-4:], "...9999"}
    assert 1000 < streamed < 10_000  # two short streams' bodies
    assert http.post("/_mock/reset").json()["requests"] == 0
    assert http.get("/_mock/stats").json() == {"requests": 0, "streams_open": 0, "streams_completed": 0,
                                               "streams_cancelled": 0, "bytes_streamed": 0, "by_key": {},
                                               "cache": {}}


def test_recorded_requests_keep_the_body_and_only_the_key_suffix(http: httpx.Client) -> None:
    sent = body("/v1/messages", "mock-text", stream=False)
    http.post("/v1/messages?beta=true", json=sent, headers={"x-api-key": KEY})
    http.post("/v1/responses", content=b"{oops", headers=AUTH)
    page = http.get("/_mock/requests")
    assert KEY not in page.text
    *_, first, second = page.json()["requests"]
    assert {k: v for k, v in first.items() if k != "headers"} == {
        "path": "/v1/messages", "query": "beta=true", "key_suffix": KEY[-4:], "body": sent}
    assert second["body"] == "{oops" and second["key_suffix"] == KEY[-4:]


def test_recorded_requests_keep_the_headers_lower_cased_without_credentials(http: httpx.Client) -> None:
    http.post("/v1/chat/completions", json=body("/v1/chat/completions", "mock-text", stream=False),
              headers=[("Authorization", f"Bearer {KEY}"), ("X-Api-Key", KEY), ("Cookie", "session=s3cret"),
                       ("Anthropic-Beta", "a-2025"), ("anthropic-beta", "b-2026"), ("X-Trace-Id", "t-1")])
    page = http.get("/_mock/requests")
    assert KEY not in page.text and "s3cret" not in page.text
    headers = page.json()["requests"][-1]["headers"]
    assert headers["anthropic-beta"] == "a-2025, b-2026"
    assert headers["x-trace-id"] == "t-1"
    assert headers["content-type"] == "application/json"
    assert not {"authorization", "x-api-key", "cookie"} & set(headers)


def test_recorded_requests_keep_only_the_last_50(http: httpx.Client) -> None:
    for i in range(55):
        http.post("/v1/chat/completions", json={"model": f"m{i}", "messages": MESSAGES}, headers=AUTH)
    recorded = http.get("/_mock/requests").json()["requests"]
    assert [r["body"]["model"] for r in recorded] == [f"m{i}" for i in range(5, 55)]
