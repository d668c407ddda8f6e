"""Cache breakpoints on Messages bodies built from Chat or Responses requests (``translation.anthropic.breakpoints``)."""

from __future__ import annotations

from typing import Any

from translation import ir
from translation.anthropic import breakpoints
from translation.anthropic.build import build_request
from translation.openai_chat.request import parse_request

EPHEMERAL = {"type": "ephemeral"}
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}


def built(messages: list[dict[str, Any]], tools: list[Any] | None = None, on: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "gpt-5", "messages": messages}
    if tools:
        body["tools"] = tools
    return build_request(parse_request(body), "claude-sonnet-4-6", ir.UpstreamCaps(cache_breakpoints=on))


def marks(body: dict[str, Any]) -> list[str]:
    """Where the body's breakpoints are, as readable paths."""

    out = [f"tools[{i}]" for i, t in enumerate(body.get("tools", [])) if "cache_control" in t]
    system = body.get("system")
    if isinstance(system, list):
        out += [f"system[{i}]" for i, b in enumerate(system) if "cache_control" in b]
    for i, m in enumerate(body["messages"]):
        out += [f"messages[{i}][{j}]" for j, b in enumerate(m["content"]) if "cache_control" in b]
    return out


CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "Sunny."},
    {"role": "user", "content": "And tomorrow?"},
]


def test_a_translated_conversation_is_marked_where_openai_would_cache_it() -> None:
    body = built(CONVERSATION, [TOOL])
    # the last message (the next turn's prefix), the system prompt, the last tool, the previous user turn
    assert sorted(marks(body)) == ["messages[0][0]", "messages[2][0]", "system[0]", "tools[0]"]
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": EPHEMERAL}]
    assert body["messages"][2]["content"][-1] == {"type": "text", "text": "And tomorrow?", "cache_control": EPHEMERAL}


def test_nothing_is_marked_with_the_switch_off() -> None:
    body = built(CONVERSATION, [TOOL], on=False)
    assert marks(body) == [] and body["system"] == "You are terse."


def test_a_trailing_assistant_prefill_is_not_the_stable_message() -> None:
    body = built([{"role": "user", "content": "Write a haiku."}, {"role": "assistant", "content": "Autumn"}])
    assert marks(body) == ["messages[0][0]"]


def test_a_thinking_block_is_never_marked_and_an_empty_message_has_no_mark() -> None:
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                         {"role": "assistant", "content": [{"type": "thinking", "thinking": "…", "signature": "s"}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"},
                                                      {"type": "text", "text": ""}]}]}
    breakpoints.place(body)
    assert "cache_control" not in body["messages"][1]["content"][0]
    assert body["messages"][2]["content"][0]["cache_control"] == EPHEMERAL  # the tool result, not the empty text
    assert "cache_control" not in body["messages"][2]["content"][1]


def test_the_limit_of_four_counts_the_marks_already_there() -> None:
    body: dict[str, Any] = {
        "system": [{"type": "text", "text": "a", "cache_control": EPHEMERAL}],
        "tools": [{"name": "t", "input_schema": {}, "cache_control": EPHEMERAL}],
        "messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "x", "content": [{"type": "text", "text": "r",
                                                                   "cache_control": EPHEMERAL}]},
            {"type": "text", "text": "q"}]}],
    }
    assert breakpoints.count(body) == 3
    breakpoints.place(body)
    assert breakpoints.count(body) == breakpoints.MAX_BREAKPOINTS
    assert body["messages"][0]["content"][1]["cache_control"] == EPHEMERAL  # the most worth first
    body["messages"].append({"role": "assistant", "content": [{"type": "text", "text": "more"}]})
    body["messages"].append({"role": "user", "content": [{"type": "text", "text": "and more"}]})
    breakpoints.place(body)  # four already: the new last message gets none
    assert "cache_control" not in body["messages"][2]["content"][0]
    assert breakpoints.count(body) == breakpoints.MAX_BREAKPOINTS
