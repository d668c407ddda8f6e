"""The content scenarios through the official SDKs: every protocol, streaming and not."""

from __future__ import annotations

import pytest

from mockupstream import scenarios

from .clients import CALLERS, TOOL_RESULT, Reply

PROTOCOLS = list(CALLERS)
STREAM = [pytest.param(True, id="stream"), pytest.param(False, id="json")]
QUESTION_TOKENS = 7  # len("What is the weather in Paris?") // 4


def call(protocol: str, base_url: str, model: str, stream: bool, **kw: object) -> Reply:
    return CALLERS[protocol](base_url, model, stream, **kw)  # type: ignore[operator]


@pytest.mark.parametrize("stream", STREAM)
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("model", ["mock-text", "gpt-5-mini", "claude-sonnet-4-6"])
def test_plain_text(protocol: str, stream: bool, model: str, base_url: str) -> None:
    reply = call(protocol, base_url, model, stream)
    assert reply.text == scenarios.HELLO
    assert reply.finish == "stop"
    assert reply.calls == [] and reply.reasoning == ""
    assert reply.input_tokens == QUESTION_TOKENS
    assert reply.output_tokens == len(scenarios.HELLO.split(" "))


@pytest.mark.parametrize("stream", STREAM)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_tool_call_to_the_first_tool(protocol: str, stream: bool, base_url: str) -> None:
    reply = call(protocol, base_url, "mock-tool", stream, tools=2)
    assert reply.finish == "tool_calls"
    assert reply.text == ""
    ((call_id, name, args),) = reply.calls
    assert call_id.startswith("call_") and name == "get_weather"
    assert args == {"city": "Paris", "days": 21}


@pytest.mark.parametrize("stream", STREAM)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_parallel_tool_calls(protocol: str, stream: bool, base_url: str) -> None:
    reply = call(protocol, base_url, "mock-parallel", stream, tools=2)
    assert reply.finish == "tool_calls"
    assert [(name, args) for _, name, args in reply.calls] == [
        ("get_weather", {"city": "Paris", "days": 21}), ("get_time", {})]
    assert len({call_id for call_id, _, _ in reply.calls}) == 2


@pytest.mark.parametrize("stream", STREAM)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_parallel_with_one_tool_calls_it_twice(protocol: str, stream: bool, base_url: str) -> None:
    reply = call(protocol, base_url, "mock-parallel", stream, tools=1)
    assert [name for _, name, _ in reply.calls] == ["get_weather", "get_weather"]
    assert reply.calls[0][0] != reply.calls[1][0]


@pytest.mark.parametrize("stream", STREAM)
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("model", ["mock-tool", "mock-parallel"])
def test_tool_result_turn_is_answered_with_text(protocol: str, stream: bool, model: str,
                                                base_url: str) -> None:
    reply = call(protocol, base_url, model, stream, tools=1, tool_turn=True)
    assert reply.text == "Tool result received: " + TOOL_RESULT
    assert reply.finish == "stop" and reply.calls == []


@pytest.mark.parametrize("stream", STREAM)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_reasoning_then_text(protocol: str, stream: bool, base_url: str) -> None:
    reply = call(protocol, base_url, "mock-reasoning", stream)
    assert reply.reasoning == scenarios.THINKING
    assert reply.text == scenarios.HELLO
    assert reply.finish == "stop"
    reasoning_deltas = len(scenarios.THINKING.split(" "))
    assert reply.output_tokens == reasoning_deltas + len(scenarios.HELLO.split(" "))
    if protocol == "anthropic":  # no reasoning-token count in Anthropic's usage
        assert len(reply.signatures) == 1 and reply.signatures[0].startswith("sig-")
    elif protocol == "responses":
        assert reply.reasoning_tokens == reasoning_deltas
        assert len(reply.signatures) == 1 and reply.signatures[0].startswith("sig-")
    else:  # Chat has no slot for a signature
        assert reply.reasoning_tokens == reasoning_deltas


@pytest.mark.parametrize("stream", STREAM)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_long_answer(protocol: str, stream: bool, base_url: str) -> None:
    reply = call(protocol, base_url, "mock-long", stream)
    assert len(reply.text.split(" ")) == 200 and reply.output_tokens == 200
