"""All 18 paths (3 client protocols × 3 upstream protocols × streaming or not) through a real gateway.

The official SDKs are the clients; the scripted upstream is the other side. Each
path is checked for plain text, a two-turn tool loop (the client runs the tool
and sends the result back) and reasoning: text, tool calls, stop reason and usage
as the client ends up with them.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY
from tests.servers import Server

UPSTREAMS = ["openai_chat", "anthropic", "responses"]
CLIENTS = ["openai_chat", "anthropic", "responses"]
MOCK_TEXT = "Hello! This is the mock upstream."
MOCK_REASONING = "Let me think about this."
TOOL_RESULT = "21C and sunny"

pytestmark = pytest.mark.django_db(transaction=True)


def model_for(upstream: str, scenario: str) -> str:
    return f"up-{upstream}/{scenario}"


def ask(gateway: Server, client_proto: str, model: str, stream: bool, text: str = "What is the weather in Paris?",
        tools: list[dict[str, Any]] | None = None) -> tuple[clients.Outcome, Any]:
    """First turn; returns the outcome and a function producing the second turn."""

    if client_proto == "openai_chat":
        c = clients.openai_client(gateway.url, CLIENT_KEY)
        msgs = [{"role": "user", "content": text}]
        out = clients.chat_call(c, model, msgs, stream, tools)
        return out, lambda res: clients.chat_call(c, model, clients.chat_next_turn(msgs, out, res), stream, tools)
    if client_proto == "anthropic":
        a = clients.anthropic_client(gateway.url, CLIENT_KEY)
        msgs = [{"role": "user", "content": text}]
        out = clients.messages_call(a, model, msgs, stream, tools)
        return out, lambda res: clients.messages_call(a, model, clients.messages_next_turn(msgs, out, res), stream, tools)
    r = clients.openai_client(gateway.url, CLIENT_KEY)
    items = [{"role": "user", "content": text}]
    out = clients.responses_call(r, model, items, stream, tools)
    return out, lambda res: clients.responses_call(r, model, clients.responses_next_turn(items, out, res), stream, tools)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("client_proto", CLIENTS)
def test_plain_text(pool: Any, gateway: Server, client_proto: str, upstream: str, stream: bool) -> None:
    out, _ = ask(gateway, client_proto, model_for(upstream, "mock-text"), stream, "Say hello")
    assert out.text == MOCK_TEXT
    assert out.tool_calls == []
    assert out.finish == "stop"
    assert out.input_tokens > 0
    assert out.output_tokens > 0


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("client_proto", CLIENTS)
def test_two_turn_tool_loop(pool: Any, gateway: Server, client_proto: str, upstream: str, stream: bool) -> None:
    first, next_turn = ask(gateway, client_proto, model_for(upstream, "mock-tool"), stream,
                           tools=[clients.WEATHER_TOOL])
    assert first.finish == "tool_calls"
    assert len(first.tool_calls) == 1
    call_id, name, args = first.tool_calls[0]
    assert call_id
    assert name == "get_weather"
    assert args == {"city": "Paris"}
    second = next_turn(TOOL_RESULT)
    assert second.finish == "stop"
    assert second.tool_calls == []
    assert second.text == f"Tool result received: {TOOL_RESULT}"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("client_proto", CLIENTS)
def test_reasoning(pool: Any, gateway: Server, client_proto: str, upstream: str, stream: bool) -> None:
    out, _ = ask(gateway, client_proto, model_for(upstream, "mock-reasoning"), stream, "Think first")
    assert out.reasoning == MOCK_REASONING
    assert out.text == MOCK_TEXT
    assert out.finish == "stop"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("client_proto", CLIENTS)
def test_parallel_tool_calls_stay_distinct(pool: Any, gateway: Server, client_proto: str, upstream: str,
                                           stream: bool) -> None:
    out, _ = ask(gateway, client_proto, model_for(upstream, "mock-parallel"), stream,
                 tools=[clients.WEATHER_TOOL, clients.CLOCK_TOOL])
    assert out.finish == "tool_calls"
    assert [name for _, name, _ in out.tool_calls] == ["get_weather", "get_time"]
    ids = [call_id for call_id, _, _ in out.tool_calls]
    assert len(set(ids)) == 2 and all(ids)
    assert all(args == {"city": "Paris"} for _, _, args in out.tool_calls)
