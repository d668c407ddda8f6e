"""Per-account rate limits of the scripted upstream, read through the official SDKs' raw responses."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import anthropic
import httpx
import openai
import pytest

from accounts.headroom import duration
from mockupstream.ratelimits import go_duration

from .clients import anthropic_client, openai_client

MESSAGES: Any = [{"role": "user", "content": "hi"}]


def chat(base_url: str, key: str) -> Any:
    return openai_client(base_url, key).chat.completions.with_raw_response.create(model="mock-text", messages=MESSAGES)


def responses(base_url: str, key: str, stream: bool = False) -> Any:
    client = openai_client(base_url, key)
    if stream:
        with client.responses.with_streaming_response.create(model="mock-text", input="hi", stream=True) as raw:
            for _ in raw.iter_lines():
                pass
            return raw
    return client.responses.with_raw_response.create(model="mock-text", input="hi")


def messages(base_url: str, key: str) -> Any:
    return anthropic_client(base_url, key).messages.with_raw_response.create(
        model="mock-text", max_tokens=10, messages=MESSAGES)


def test_chat_answers_carry_openais_headers_and_the_fourth_request_is_refused(base_url: str,
                                                                             http: httpx.Client) -> None:
    key = "sk-mock-rl3r-chat1"
    seen = [chat(base_url, key).headers for _ in range(3)]
    assert [h["x-ratelimit-remaining-requests"] for h in seen] == ["2", "1", "0"]
    assert all(h["x-ratelimit-limit-requests"] == "3" for h in seen)
    assert 50 < (duration(seen[-1]["x-ratelimit-reset-requests"]) or 0) <= 60
    with pytest.raises(openai.RateLimitError) as info:
        chat(base_url, key)
    refused = info.value.response
    assert 50 < int(refused.headers["retry-after"]) <= 60
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    assert info.value.code == "rate_limit_exceeded"
    chat(base_url, "sk-mock-rl3r-other")  # another account has its own window
    assert http.get("/_mock/ratelimits").json()["refused"] == 1


def test_anthropic_answers_carry_anthropics_headers_with_rfc3339_resets(base_url: str, http: httpx.Client) -> None:
    key = "sk-ant-rl2r-msg1"
    first = messages(base_url, key).headers
    assert first["anthropic-ratelimit-requests-limit"] == "2"
    assert first["anthropic-ratelimit-requests-remaining"] == "1"
    reset = dt.datetime.fromisoformat(first["anthropic-ratelimit-requests-reset"].replace("Z", "+00:00"))
    assert 50 < reset.timestamp() - time.time() <= 61
    assert "x-ratelimit-remaining-requests" not in first
    messages(base_url, key)
    with pytest.raises(anthropic.RateLimitError) as info:
        messages(base_url, key)
    assert info.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    assert info.value.response.headers["anthropic-ratelimit-requests-remaining"] == "0"


def test_tokens_are_limited_too_and_a_window_ends(base_url: str, http: httpx.Client) -> None:
    key = "sk-mock-rl100r3t1s-tok1"  # 3 input tokens a second; "hi" is 1 token
    got = [responses(base_url, key).headers["x-ratelimit-remaining-tokens"] for _ in range(3)]
    assert got == ["2", "1", "0"]
    with pytest.raises(openai.RateLimitError):
        responses(base_url, key)
    time.sleep(1.1)
    assert responses(base_url, key, stream=True).headers["x-ratelimit-remaining-tokens"] == "2"  # a stream's too


def test_defaults_for_every_key_are_set_and_lifted_by_the_control_endpoint(base_url: str, http: httpx.Client) -> None:
    assert http.post("/_mock/ratelimits", json={"requests": 1, "window": 30}).status_code == 200
    chat(base_url, "sk-mock-plain-0001")
    with pytest.raises(openai.RateLimitError):
        chat(base_url, "sk-mock-plain-0001")
    assert http.post("/_mock/ratelimits", json={"requests": "many"}).status_code == 400
    http.post("/_mock/reset")
    assert "x-ratelimit-remaining-requests" not in chat(base_url, "sk-mock-plain-0001").headers


def test_keys_without_a_marker_carry_no_rate_limit_headers(base_url: str, http: httpx.Client) -> None:
    assert "anthropic-ratelimit-requests-remaining" not in messages(base_url, "sk-ant-world-0001").headers


@pytest.mark.parametrize(("seconds", "text"), [(0.02, "20ms"), (1, "1s"), (1.5, "1.5s"), (360, "6m0s"),
                                               (3723, "1h2m3s")])
def test_durations_read_back_as_written(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text
    assert duration(text) == pytest.approx(seconds)
