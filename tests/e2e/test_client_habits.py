"""Real clients' habits are normal input: Claude Code on /v1/messages, Codex CLI on /v1/responses.

Fields the gateway does not model reach a same-protocol upstream untouched and
are dropped (never a 400) when the request is translated. The scripted upstream
records what it received (``/_mock/requests``), which is what these tests read.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY
from tests.servers import Server, received
from translation.sse import SSEParser

pytestmark = pytest.mark.django_db(transaction=True)


def claude_code_body(model: str) -> dict[str, Any]:
    tools = [{"name": f"Tool{i}", "description": f"tool number {i}",
              "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}
             for i in range(12)]
    tools[-1]["cache_control"] = {"type": "ephemeral"}
    return {
        "model": model, "max_tokens": 32000, "stream": True,
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "metadata": {"user_id": "user_abc_account_def_session_123"},
        "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
            {"type": "text", "text": "List the files", "cache_control": {"type": "ephemeral"}}]}],
        "tools": tools,
    }


def last_upstream_request(mock: Server) -> dict[str, Any]:
    requests = received(mock)
    assert requests, "the upstream received nothing"
    return requests[-1]


def post_stream(gateway: Server, path: str, body: dict[str, Any], headers: dict[str, str]) -> list[Any]:
    parser = SSEParser()
    with httpx.stream("POST", gateway.url + path, json=body, headers=headers, timeout=30) as resp:
        assert resp.status_code == 200, resp.read()
        events = []
        for chunk in resp.iter_raw():
            events.extend(parser.feed(chunk))
    return events + parser.finish()


CLAUDE_CODE_HEADERS = {"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01",
                       # Names the beta of every beta-only field of claude_code_body (the upstream checks, as the real API does).
                       "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,"
                                         "effort-2025-11-24",
                       "user-agent": "claude-cli/2.1.0 (external, cli)"}


def test_claude_code_request_passes_through_to_an_anthropic_upstream(pool: Any, gateway: Server,
                                                                     mock_upstream: Server) -> None:
    events = post_stream(gateway, "/v1/messages?beta=true", claude_code_body("up-anthropic/mock-text"),
                         CLAUDE_CODE_HEADERS)
    assert [e.event for e in events][:2] == ["message_start", "ping"]
    assert events[-1].event == "message_stop"
    sent = last_upstream_request(mock_upstream)["body"]
    assert sent["model"] == "mock-text"
    assert sent["context_management"] == claude_code_body("x")["context_management"]
    assert sent["output_config"] == {"effort": "high"}
    assert sent["thinking"] == {"type": "adaptive"}
    assert sent["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert len(sent["tools"]) == 12


@pytest.mark.parametrize("upstream", ["openai_chat", "responses"])
def test_claude_code_request_is_translated_without_its_extras(pool: Any, gateway: Server, mock_upstream: Server,
                                                              upstream: str) -> None:
    events = post_stream(gateway, "/v1/messages?beta=true", claude_code_body(f"up-{upstream}/mock-text"),
                         CLAUDE_CODE_HEADERS)
    assert events[-1].event == "message_stop"
    sent = last_upstream_request(mock_upstream)["body"]
    for extra in ("context_management", "output_config", "thinking", "cache_control"):
        assert extra not in str(sent), extra
    assert len(sent["tools"]) == 12
    # adaptive thinking with effort "high" becomes the upstream's own reasoning knob
    effort = sent.get("reasoning_effort") or sent.get("reasoning", {}).get("effort")
    assert effort == "high"


def codex_body(model: str) -> dict[str, Any]:
    return {
        "model": model, "stream": True, "store": False, "parallel_tool_calls": False,
        "include": ["reasoning.encrypted_content"], "prompt_cache_key": "session-1",
        "instructions": "You are Codex, a coding agent.",
        "reasoning": {"effort": "medium", "summary": "auto"},
        "tools": [
            {"type": "function", "name": "shell", "description": "Run a command",
             "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}},
                            "required": ["command"]}, "strict": False},
            {"type": "web_search"},
            {"type": "namespace", "name": "mcp__files", "description": "file tools",
             "tools": [{"type": "function", "name": "read_file", "description": "Read a file",
                        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]},
        ],
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<env>linux</env>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "I should run ls."}],
             "encrypted_content": "gAAAAB-opaque-reasoning-state"},
            {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{\"command\":[\"ls\"]}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "README.md\nsrc"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "thanks, now summarise"}]},
        ],
    }


def test_codex_request_passes_through_to_a_responses_upstream(pool: Any, gateway: Server,
                                                              mock_upstream: Server) -> None:
    events = post_stream(gateway, "/v1/responses", codex_body("up-responses/mock-text"),
                         {"authorization": f"Bearer {CLIENT_KEY}"})
    assert events[0].event == "response.created" and events[-1].event == "response.completed"
    sent = last_upstream_request(mock_upstream)["body"]
    assert sent["store"] is False
    assert sent["include"] == ["reasoning.encrypted_content"]
    assert {"type": "web_search"} in sent["tools"]
    assert sent["input"][2]["encrypted_content"] == "gAAAAB-opaque-reasoning-state"


@pytest.mark.parametrize("upstream", ["openai_chat", "anthropic"])
def test_codex_request_is_translated_with_history_and_tools(pool: Any, gateway: Server, mock_upstream: Server,
                                                            upstream: str) -> None:
    events = post_stream(gateway, "/v1/responses", codex_body(f"up-{upstream}/mock-text"),
                         {"authorization": f"Bearer {CLIENT_KEY}"})
    assert events[-1].event == "response.completed"
    sent = last_upstream_request(mock_upstream)["body"]
    text = str(sent)
    assert "namespace" not in text
    # A namespace's functions are flattened to "<namespace>__<name>"; the hosted web search
    # becomes Anthropic's server tool, and has no Chat equivalent.
    functions = [t for t in sent["tools"] if t.get("type") in (None, "function")]
    names = sorted(t.get("name") or t["function"]["name"] for t in functions)
    assert names == ["mcp__files__read_file", "shell"]
    web_search = [t for t in sent["tools"] if t.get("type") == "web_search_20250305"]
    assert len(web_search) == (1 if upstream == "anthropic" else 0)
    assert "README.md" in text  # the tool result reached the upstream
    assert "call_1" in text
    assert "You are Codex" in text


def test_codex_full_history_through_the_sdk_each_turn(pool: Any, gateway: Server) -> None:
    client = clients.openai_client(gateway.url, CLIENT_KEY)
    body = codex_body("up-anthropic/mock-tool")
    tools = [{k: v for k, v in t.items()} for t in body["tools"]]
    with client.responses.stream(model=body["model"], input=body["input"][:2], tools=tools,
                                 store=False, include=["reasoning.encrypted_content"]) as s:
        first = s.get_final_response()
    calls = [i for i in first.output if i.type == "function_call"]
    assert calls and calls[0].name == "shell"
    history = [*body["input"][:2], *[i.model_dump(exclude_none=True) for i in first.output],
               {"type": "function_call_output", "call_id": calls[0].call_id, "output": "README.md"}]
    with client.responses.stream(model=body["model"], input=history, tools=tools, store=False) as s:
        second = s.get_final_response()
    assert second.output_text == "Tool result received: README.md"


def test_health_and_readiness(gateway: Server) -> None:
    assert httpx.get(gateway.url + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(gateway.url + "/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ok"


def test_models_list_in_openai_format(pool: Any, gateway: Server) -> None:
    models = clients.openai_client(gateway.url, CLIENT_KEY).models.list()
    ids = [m.id for m in models.data]
    assert len(ids) == len(set(ids))
    # from the upstreams' own /models; with no alias, a name routes only as provider/name, so it is listed so
    assert "up-openai_chat/mock-text" in ids and "mock-text" not in ids
