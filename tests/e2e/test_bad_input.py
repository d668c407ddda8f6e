"""Malformed requests get a 4xx in the caller's own error envelope, never a 500 or a traceback."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.e2e.conftest import CLIENT_KEY
from tests.servers import Server

pytestmark = pytest.mark.django_db(transaction=True)

CHAT, MSGS, RESP = "/v1/chat/completions", "/v1/messages", "/v1/responses"
OK_CHAT = {"model": "up-openai_chat/mock-text", "messages": [{"role": "user", "content": "hi"}]}
OK_MSGS = {"model": "up-anthropic/mock-text", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
OK_RESP = {"model": "up-responses/mock-text", "input": "hi"}

CASES: list[tuple[str, str, Any, int, str | None]] = [
    # (id, path, body (bytes = raw), expected status, a word the message must contain)
    ("chat-invalid-json", CHAT, b'{"model": "x", ', 400, "JSON"),
    ("chat-array-body", CHAT, b"[1, 2]", 400, "object"),
    ("chat-empty-body", CHAT, b"", 400, "empty"),
    ("chat-missing-model", CHAT, {"messages": OK_CHAT["messages"]}, 400, "model"),
    ("chat-model-number", CHAT, {**OK_CHAT, "model": 42}, 400, "model"),
    ("chat-missing-messages", CHAT, {"model": OK_CHAT["model"]}, 400, "messages"),
    ("chat-messages-string", CHAT, {**OK_CHAT, "messages": "hi"}, 400, "messages"),
    ("chat-unknown-role", CHAT, {**OK_CHAT, "messages": [{"role": "wizard", "content": "x"}]}, 400, "role"),
    ("chat-content-number", CHAT, {**OK_CHAT, "messages": [{"role": "user", "content": 5}]}, 400, "content"),
    ("chat-temperature-string", CHAT, {**OK_CHAT, "temperature": "hot"}, 400, "temperature"),
    ("chat-tools-object", CHAT, {**OK_CHAT, "tools": {"name": "x"}}, 400, "tools"),
    ("chat-unknown-model", CHAT, {**OK_CHAT, "model": "no-such-model"}, 404, "no-such-model"),
    ("msgs-invalid-json", MSGS, b"{nope", 400, "JSON"),
    ("msgs-missing-max-tokens", MSGS, {k: v for k, v in OK_MSGS.items() if k != "max_tokens"}, 400, "max_tokens"),
    ("msgs-max-tokens-string", MSGS, {**OK_MSGS, "max_tokens": "ten"}, 400, "max_tokens"),
    ("msgs-bad-role", MSGS, {**OK_MSGS, "messages": [{"role": "system", "content": "x"}]}, 400, "role"),
    ("msgs-block-without-type", MSGS, {**OK_MSGS, "messages": [{"role": "user", "content": [{"text": "x"}]}]}, 400, "type"),
    ("msgs-system-number", MSGS, {**OK_MSGS, "system": 7}, 400, "system"),
    ("msgs-unknown-model", MSGS, {**OK_MSGS, "model": "claude-none"}, 404, "claude-none"),
    ("resp-invalid-json", RESP, b"not json at all", 400, "JSON"),
    ("resp-missing-model", RESP, {"input": "hi"}, 400, "model"),
    ("resp-input-number", RESP, {**OK_RESP, "input": 12}, 400, "input"),
    ("resp-bad-item", RESP, {**OK_RESP, "input": [{"type": "function_call_output", "output": "x"}]}, 400, "call_id"),
    ("resp-max-output-string", RESP, {**OK_RESP, "max_output_tokens": "many"}, 400, "max_output_tokens"),
]


def check_envelope(path: str, resp: httpx.Response, status: int, word: str | None) -> None:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    if path == MSGS:
        assert body["type"] == "error"
        assert isinstance(body["error"]["type"], str) and body["error"]["type"]
        message = body["error"]["message"]
    else:
        assert isinstance(body["error"]["type"], str) and body["error"]["type"]
        message = body["error"]["message"]
    assert isinstance(message, str) and message
    assert "Traceback" not in message
    if word:
        assert word.lower() in message.lower(), message


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gets_4xx_in_callers_envelope(pool: Any, gateway: Server, case: tuple[str, str, Any, int, str | None]) -> None:
    _, path, body, status, word = case
    content = body if isinstance(body, bytes) else httpx.Request("POST", "http://x", json=body).content
    resp = httpx.post(gateway.url + path, content=content, timeout=10,
                      headers={"authorization": f"Bearer {CLIENT_KEY}", "content-type": "application/json"})
    check_envelope(path, resp, status, word)


@pytest.mark.parametrize("path", [CHAT, MSGS, RESP])
def test_missing_or_wrong_key_is_401_in_callers_envelope(pool: Any, gateway: Server, path: str) -> None:
    body = {CHAT: OK_CHAT, MSGS: OK_MSGS, RESP: OK_RESP}[path]
    check_envelope(path, httpx.post(gateway.url + path, json=body, timeout=10), 401, "key")
    wrong = httpx.post(gateway.url + path, json=body, timeout=10, headers={"authorization": "Bearer gw-wrong"})
    check_envelope(path, wrong, 401, "invalid")


def test_messages_accepts_x_api_key(pool: Any, gateway: Server) -> None:
    resp = httpx.post(gateway.url + MSGS + "?beta=true", json=OK_MSGS, timeout=10,
                      headers={"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01",
                               "anthropic-beta": "interleaved-thinking-2025-05-14"})
    assert resp.status_code == 200, resp.text
    assert resp.json()["type"] == "message"


@pytest.mark.parametrize("path", [CHAT, MSGS, RESP])
def test_oversized_body_is_refused_with_413(pool: Any, gateway: Server, path: str) -> None:
    big = b'{"model": "x", "pad": "' + b"x" * (33 * 1024 * 1024) + b'"}'
    resp = httpx.post(gateway.url + path, content=big, timeout=30,
                      headers={"authorization": f"Bearer {CLIENT_KEY}", "content-type": "application/json"})
    check_envelope(path, resp, 413, "limit")


@pytest.mark.parametrize("path", [CHAT, MSGS, RESP, "/v1/models"])
def test_cors_preflight_is_answered_without_auth(gateway: Server, path: str) -> None:
    resp = httpx.options(gateway.url + path, timeout=10, headers={
        "origin": "https://app.example", "access-control-request-method": "POST"})
    assert resp.status_code == 200
    assert resp.headers["access-control-allow-origin"] == "*"
    assert "POST" in resp.headers["access-control-allow-methods"]
    assert "x-api-key" in resp.headers["access-control-allow-headers"].lower()
    assert resp.content == b""
