"""Fault keys through the official SDKs, and the in-stream error on the raw wire."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import openai
import pytest

from translation import sse

from .clients import anthropic_client, openai_client

FAULTS = [
    ("sk-fail-429-0001", 429, "Rate limit"),
    ("sk-fail-401-0001", 401, "Incorrect API key"),
    ("sk-fail-402-0001", 402, "Insufficient balance"),
    ("sk-fail-403-cost-0001", 403, "estimated cost exceeds the limit for this request"),
    ("sk-fail-403-tokens-0001", 403, "insufficient tokens"),
    ("sk-fail-500-0001", 500, "The server had an error"),
    ("sk-fail-stream-error-0001", 429, "Rate limit"),  # non-streaming: the 429
]
OPENAI_ERRORS = {429: openai.RateLimitError, 401: openai.AuthenticationError,
                 403: openai.PermissionDeniedError, 500: openai.InternalServerError}
ANTHROPIC_ERRORS = {429: anthropic.RateLimitError, 401: anthropic.AuthenticationError,
                    403: anthropic.PermissionDeniedError, 500: anthropic.InternalServerError}
MESSAGES: Any = [{"role": "user", "content": "hi"}]


def check_retry_after(status: int, response: httpx.Response) -> None:
    if status == 429:
        assert response.headers["retry-after"] == "30"


@pytest.mark.parametrize(("key", "status", "text"), FAULTS)
@pytest.mark.parametrize("model", ["mock-text", "mock-tool"])
def test_chat_faults(key: str, status: int, text: str, model: str, base_url: str) -> None:
    with pytest.raises(openai.APIStatusError) as info:
        openai_client(base_url, key).chat.completions.create(model=model, messages=MESSAGES)
    assert info.value.status_code == status
    assert isinstance(info.value, OPENAI_ERRORS.get(status, openai.APIStatusError))
    body = info.value.response.json()
    assert text in body["error"]["message"] and set(body["error"]) >= {"type", "code", "param"}
    check_retry_after(status, info.value.response)


@pytest.mark.parametrize(("key", "status", "text"), FAULTS)
def test_responses_faults(key: str, status: int, text: str, base_url: str) -> None:
    with pytest.raises(openai.APIStatusError) as info:
        openai_client(base_url, key).responses.create(model="mock-text", input="hi")
    assert info.value.status_code == status
    assert text in info.value.response.json()["error"]["message"]
    check_retry_after(status, info.value.response)


@pytest.mark.parametrize(("key", "status", "text"), FAULTS)
def test_anthropic_faults(key: str, status: int, text: str, base_url: str) -> None:
    with pytest.raises(anthropic.APIStatusError) as info:
        anthropic_client(base_url, key).messages.create(model="mock-text", max_tokens=10,
                                                        messages=MESSAGES)
    assert info.value.status_code == status
    assert isinstance(info.value, ANTHROPIC_ERRORS.get(status, anthropic.APIStatusError))
    body = info.value.response.json()
    assert body["type"] == "error" and text in body["error"]["message"]
    expected_type = {429: "rate_limit_error", 401: "authentication_error", 402: "billing_error",
                     403: "permission_error", 500: "api_error"}[status]
    assert body["error"]["type"] == expected_type
    check_retry_after(status, info.value.response)


def test_streaming_fault_is_an_http_error_not_a_stream(base_url: str) -> None:
    with pytest.raises(openai.RateLimitError):
        list(openai_client(base_url, "sk-fail-429-0001").chat.completions.create(
            model="mock-text", messages=MESSAGES, stream=True))


@pytest.mark.parametrize(("path", "auth"), [
    ("/v1/chat/completions", "Authorization"), ("/v1/responses", "Authorization"),
    ("/v1/messages", "x-api-key")])
def test_missing_key_is_a_401_in_the_protocol_envelope(path: str, auth: str, http: httpx.Client) -> None:
    r = http.post(path, json={"model": "mock-text", "messages": MESSAGES, "input": "hi",
                              "max_tokens": 5})
    assert r.status_code == 401
    body = r.json()
    assert (body["type"] == "error") if path == "/v1/messages" else ("message" in body["error"])


# ----------------------------------------------------------------- fail-stream-error


def stream_events(http: httpx.Client, path: str, body: dict[str, Any],
                  key: str = "sk-fail-stream-error-0001") -> tuple[httpx.Response, list[sse.SSEEvent]]:
    r = http.post(path, json={**body, "stream": True}, headers={"Authorization": f"Bearer {key}"})
    parser = sse.SSEParser()
    return r, parser.feed(r.content) + parser.finish()


def test_chat_stream_error_chunk_before_any_content(http: httpx.Client) -> None:
    r, events = stream_events(http, "/v1/chat/completions", {"model": "mock-text", "messages": MESSAGES})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    chunks = [sse.loads(e.data) for e in events if e.data != "[DONE]"]
    error_at = next(i for i, c in enumerate(chunks) if c.get("error"))
    assert all(not c["choices"][0]["delta"].get("content") for c in chunks[:error_at])
    assert "Rate limit" in chunks[error_at]["error"]["message"]
    with pytest.raises(openai.APIError, match="Rate limit"):
        list(openai_client(str(http.base_url).rstrip("/"), "sk-fail-stream-error-0001")
             .chat.completions.create(model="mock-text", messages=MESSAGES, stream=True))


def test_anthropic_stream_overloaded_error_before_any_content(http: httpx.Client) -> None:
    r, events = stream_events(http, "/v1/messages", {"model": "mock-text", "max_tokens": 5,
                                                     "messages": MESSAGES}, key="sk-fail-stream-overloaded-01")
    names = [e.event for e in events]
    error_at = names.index("error")
    assert set(names[:error_at]) <= {"message_start", "ping"}
    assert sse.loads(events[error_at].data)["error"]["type"] == "overloaded_error"
    client = anthropic_client(str(http.base_url).rstrip("/"), "sk-fail-stream-overloaded-01")
    with pytest.raises(anthropic.APIStatusError, match="Overloaded"):
        with client.messages.stream(model="mock-text", max_tokens=5, messages=MESSAGES) as s:
            s.get_final_message()


def test_responses_stream_fails_with_rate_limit_before_any_content(http: httpx.Client) -> None:
    r, events = stream_events(http, "/v1/responses", {"model": "mock-text", "input": "hi"})
    names = [e.event for e in events]
    failed_at = names.index("response.failed")
    assert set(names[:failed_at]) <= {"response.created", "response.in_progress"}
    failed = sse.loads(events[failed_at].data)["response"]
    assert failed["status"] == "failed" and failed["error"]["code"] == "rate_limit_exceeded"
    client = openai_client(str(http.base_url).rstrip("/"), "sk-fail-stream-error-0001")
    last = list(client.responses.create(model="mock-text", input="hi", stream=True))[-1]
    assert last.type == "response.failed"


def test_a_healed_key_answers_as_a_good_one_until_broken_again_or_reset(base_url: str,
                                                                       http: httpx.Client) -> None:
    key = "sk-fail-401-heal-7f3a"
    client = openai_client(base_url, key)
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model="mock-text", messages=MESSAGES)
    assert http.post("/_mock/heal", json={"key_suffix": "7f3a"}).json() == {"healed": ["7f3a"]}
    assert client.chat.completions.create(model="mock-text", messages=MESSAGES).choices[0].message.content
    http.post("/_mock/heal", json={"key_suffix": "7f3a", "healed": False})
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model="mock-text", messages=MESSAGES)
    http.post("/_mock/heal", json={"key_suffix": "7f3a"})
    http.post("/_mock/reset")
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model="mock-text", messages=MESSAGES)
    assert http.post("/_mock/heal", json={"key_suffix": "3a"}).status_code == 400


@pytest.mark.parametrize(("key", "retry_after"), [
    ("sk-fail-429-3s-0001", "3"), ("sk-fail-429-no-retry-after-0001", None), ("sk-fail-429-0001", "30")])
def test_a_rate_limit_names_the_wait_the_key_asks_for(key: str, retry_after: str | None, base_url: str) -> None:
    with pytest.raises(openai.RateLimitError) as info:
        openai_client(base_url, key).chat.completions.create(model="mock-text", messages=MESSAGES)
    assert info.value.response.headers.get("retry-after") == retry_after
