"""Every captured client request (tests/fixtures/clients) parses and builds for every
upstream protocol, and what each builder emits is a valid body of that protocol.

Valid means: the official SDK's request TypedDict accepts it (validated with pydantic,
lazy iterables forced), our own parser of that protocol accepts it, and the rules the
APIs enforce beyond types hold (message order, tool calls answered, tool names
flattened, unique and within the name pattern, betas declared).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pydantic
import pytest
from anthropic.types import message_create_params
from openai.types.chat import completion_create_params
from openai.types.responses import response_create_params

from translation import anthropic, ir, registry

CLIENTS = Path(__file__).parents[1] / "fixtures" / "clients"
CAPTURES = [(path.stem, i, request) for path in sorted(CLIENTS.glob("*.json"))
            for i, request in enumerate(json.loads(path.read_text())["requests"])]
IDS = [f"{name}#{i}" for name, i, _ in CAPTURES]
PROTOCOL_OF_PATH = {"/v1/messages": "anthropic", "/v1/chat/completions": "openai_chat", "/v1/responses": "responses"}
TARGETS = ["openai_chat", "anthropic", "responses"]
# Kept alive at module level: the lazy iterators they return need their adapter to still exist.
SDK_PARAMS: dict[str, pydantic.TypeAdapter[Any]] = {
    "openai_chat": pydantic.TypeAdapter(completion_create_params.CompletionCreateParams),
    "anthropic": pydantic.TypeAdapter(message_create_params.MessageCreateParams),
    "responses": pydantic.TypeAdapter(response_create_params.ResponseCreateParams),
}
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def materialize(value: Any) -> Any:
    """pydantic validates ``Iterable`` fields lazily: walk everything so that it happens."""

    if isinstance(value, dict):
        return {k: materialize(v) for k, v in value.items()}
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, Iterable):
        return [materialize(v) for v in value]
    return value


def parsed(capture: dict[str, Any]) -> ir.Request:
    return registry.get(PROTOCOL_OF_PATH[capture["path"]]).parse_request(capture["body"])


def built(capture: dict[str, Any], target: str) -> tuple[ir.Request, dict[str, Any]]:
    req = parsed(capture)
    return req, registry.get(target).build_request(req, "upstream-model", ir.UpstreamCaps())


def assert_tool_names(names: list[str]) -> None:
    assert len(names) == len(set(names)), names
    assert all(TOOL_NAME.match(n) for n in names), names


def check_chat(body: dict[str, Any]) -> None:
    messages = body["messages"]
    seen_non_system = False
    for i, msg in enumerate(messages):
        if msg["role"] != "system":
            seen_non_system = True
        if msg["role"] == "tool":
            assert seen_non_system
        calls = [c["id"] for c in msg.get("tool_calls") or []]
        if calls:  # every call answered by the tool messages right after it
            answers = [m["tool_call_id"] for m in messages[i + 1:i + 1 + len(calls)] if m["role"] == "tool"]
            assert sorted(answers) == sorted(calls)
    assert_tool_names([t["function"]["name"] for t in body.get("tools", [])])


def check_anthropic(body: dict[str, Any]) -> None:
    messages = body["messages"]
    assert messages[0]["role"] == "user"
    for prev, msg in zip(messages, messages[1:]):
        assert prev["role"] != msg["role"], "consecutive turns of one role"
        if msg["role"] == "system":
            assert prev["role"] == "user", "a system message must follow a user turn"
    for i, msg in enumerate(messages):
        uses = [b["id"] for b in msg["content"] if b["type"] == "tool_use"]
        if uses and i + 1 < len(messages):
            results = {b["tool_use_id"] for b in messages[i + 1]["content"] if b["type"] == "tool_result"}
            assert set(uses) <= results
    if any(m["role"] == "system" for m in messages):
        assert "mid-conversation-system-2026-04-07" in anthropic.required_betas(body)
    assert_tool_names([t["name"] for t in body.get("tools", [])])


def check_responses(body: dict[str, Any]) -> None:
    calls = [i["call_id"] for i in body["input"] if i.get("type") == "function_call"]
    outputs = {i["call_id"] for i in body["input"] if i.get("type") == "function_call_output"}
    assert set(calls) <= outputs
    assert_tool_names([t["name"] for t in body.get("tools", []) if t["type"] == "function"])


CHECKS = {"openai_chat": check_chat, "anthropic": check_anthropic, "responses": check_responses}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name, index, capture", CAPTURES, ids=IDS)
def test_every_captured_request_builds_a_valid_body_for_every_upstream(name: str, index: int,
                                                                       capture: dict[str, Any], target: str) -> None:
    _, body = built(capture, target)
    materialize(SDK_PARAMS[target].validate_python(body))
    registry.get(target).parse_request(body)  # our own parser of that protocol accepts it
    CHECKS[target](body)


@pytest.mark.parametrize("target, bad", [
    ("openai_chat", {"model": "m", "messages": [{"role": "user", "content": [{"type": "text"}]}]}),
    ("anthropic", {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "text"}]}]}),
    ("responses", {"model": "m", "input": [{"type": "message", "role": "user", "content": [{"type": "input_text"}]}]}),
])
def test_the_sdk_check_rejects_a_malformed_nested_part(target: str, bad: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        materialize(SDK_PARAMS[target].validate_python(bad))


@pytest.mark.parametrize("index", [0, 1])
def test_claude_codes_system_message_and_reasoning_reach_the_openai_upstreams(index: int) -> None:
    capture = json.loads((CLIENTS / "claude-code-2.1.197.json").read_text())["requests"][index]
    _, chat = built(capture, "openai_chat")
    roles = [m["role"] for m in chat["messages"]]
    assert roles[:3] == ["system", "user", "system"]  # the top-level system, then the mid-conversation one
    assert chat["reasoning_effort"] == "high"
    _, resp = built(capture, "responses")
    assert [i.get("role") for i in resp["input"][:2]] == ["user", "developer"]
    assert resp["reasoning"]["effort"] == "high"
    for body in (chat, resp):
        assert "context_management" not in body
    _, claude = built(capture, "anthropic")
    assert claude["thinking"] == {"type": "adaptive"} and claude["output_config"] == {"effort": "high"}
    assert claude["messages"][1]["role"] == "system"


@pytest.mark.parametrize("index", [0, 1])
def test_codexs_namespace_and_web_search_tools_on_each_upstream(index: int) -> None:
    capture = json.loads((CLIENTS / "codex-0.169.0.json").read_text())["requests"][index]
    req, chat = built(capture, "openai_chat")
    names = [t["function"]["name"] for t in chat["tools"]]
    assert "multi_agent_v1__spawn_agent" in names and "exec_command" in names
    assert "web_search" in req.dropped_tools and chat["prompt_cache_key"] == capture["body"]["prompt_cache_key"]
    _, claude = built(capture, "anthropic")
    assert {"type": "web_search_20250305", "name": "web_search"} in claude["tools"]
    assert "prompt_cache_key" not in claude and "client_metadata" not in claude
    _, resp = built(capture, "responses")
    assert {"type": "web_search"} in resp["tools"]
