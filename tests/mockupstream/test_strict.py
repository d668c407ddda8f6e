"""The Anthropic endpoint refuses beta-only fields whose beta the anthropic-beta header does not name."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

KEY = "sk-mock-strict-test-5c2e"
CLIENTS = Path(__file__).resolve().parents[1] / "fixtures" / "clients"
CAPTURE = CLIENTS / "claude-code-2.1.197.json"
BASE = {"model": "mock-text", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}

# Each beta-only field Claude Code sends (2.1.197 and 2.1.332), with the beta that unlocks it and the path the
# error names.
GATED: list[tuple[dict[str, Any], str, str]] = [
    ({"context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}},
     "context-management-2025-06-27", "context_management"),
    ({"output_config": {"effort": "high"}}, "effort-2025-11-24", "output_config.effort"),
    ({"messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": "Be brief."},
                   {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}]},
     "mid-conversation-system-2026-04-07", "messages.1.role"),
    ({"tools": [{"name": "Read", "input_schema": {"type": "object"}},
                {"name": "DeferredToolPlaceholder", "input_schema": {"type": "object"}, "defer_loading": True}]},
     "advanced-tool-use-2025-11-20", "tools.1.defer_loading"),
]


def claude_code_request(version: str) -> tuple[dict[str, Any], str]:
    captured = json.loads((CLIENTS / f"claude-code-{version}.json").read_text())["requests"][0]
    return captured["body"], captured["headers"]["anthropic-beta"]


def post(http: httpx.Client, body: dict[str, Any], betas: list[str] | None = None) -> httpx.Response:
    headers = [("x-api-key", KEY), ("anthropic-version", "2023-06-01")]
    headers += [("anthropic-beta", b) for b in betas or []]
    return http.post("/v1/messages?beta=true", json=body, headers=headers)


@pytest.mark.parametrize(("extra", "beta", "path"), GATED, ids=[g[1] for g in GATED])
def test_beta_field_without_its_beta_is_an_invalid_request_naming_field_and_beta(
        http: httpx.Client, extra: dict[str, Any], beta: str, path: str) -> None:
    resp = post(http, {**BASE, **extra}, ["claude-code-20250219,interleaved-thinking-2025-05-14"])
    assert resp.status_code == 400
    error = resp.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert error["error"]["message"].startswith(f"{path}: ")
    assert beta in error["error"]["message"]


@pytest.mark.parametrize(("extra", "beta"), [g[:2] for g in GATED[:2]], ids=[g[1] for g in GATED[:2]])
def test_beta_field_is_accepted_when_its_beta_is_named(http: httpx.Client, extra: dict[str, Any], beta: str) -> None:
    resp = post(http, {**BASE, **extra}, [f"claude-code-20250219, {beta}"])
    assert resp.status_code == 200, resp.text
    assert resp.json()["content"][0]["text"] == "Hello! This is the mock upstream."


def test_betas_may_come_in_several_headers(http: httpx.Client) -> None:
    body = {**BASE, **GATED[0][0], **GATED[1][0]}
    assert post(http, body, ["context-management-2025-06-27", "effort-2025-11-24"]).status_code == 200


# For each capture: the beta taken out of its header, and the path the refusal then names.
CAPTURED_GATES = {
    "2.1.197": [("context-management-2025-06-27", "context_management"), ("effort-2025-11-24", "output_config.effort"),
                ("mid-conversation-system-2026-04-07", "messages.1.role")],
    "2.1.332": [("context-management-2025-06-27", "context_management"), ("effort-2025-11-24", "output_config.effort"),
                ("mid-conversation-tool-changes-2026-07-01", "messages.1.role"),
                ("advanced-tool-use-2025-11-20", "tools.10.defer_loading")],
}


@pytest.mark.parametrize("version", sorted(CAPTURED_GATES))
def test_claude_code_request_passes_with_its_own_header_and_fails_without_each_of_its_betas(
        http: httpx.Client, version: str) -> None:
    body, header = claude_code_request(version)
    betas = [b.strip() for b in header.split(",")]
    # With its own header the request gets past the beta check (the parse may still refuse it: not this test's concern).
    own = post(http, copy.deepcopy(body), [header])
    assert "anthropic-beta header" not in own.text
    for beta, path in CAPTURED_GATES[version]:
        assert beta in betas
        resp = post(http, copy.deepcopy(body), [",".join(b for b in betas if b != beta)])
        assert resp.status_code == 400, beta
        assert resp.json()["error"]["message"].startswith(f"{path}: "), resp.text


def test_a_deferred_tool_is_unlocked_by_the_tool_search_beta_too(http: httpx.Client) -> None:
    body = {**BASE, **GATED[3][0]}
    assert post(http, body, ["claude-code-20250219,tool-search-tool-2025-10-19"]).status_code == 200


def test_a_system_message_is_unlocked_by_the_tool_changes_beta_too(http: httpx.Client) -> None:
    body = {**BASE, **GATED[2][0]}
    assert post(http, body, ["mid-conversation-tool-changes-2026-07-01"]).status_code == 200
    refused = post(http, body, ["claude-code-20250219"])
    assert refused.status_code == 400 and "mid-conversation-system-2026-04-07" in refused.text


def test_other_protocols_ignore_anthropic_betas(http: httpx.Client) -> None:
    resp = http.post("/v1/responses", json={"model": "mock-text", "input": "hi", "context_management": [{"x": 1}]},
                     headers={"Authorization": f"Bearer {KEY}"})
    assert resp.status_code == 200
