"""The scenario logic alone: request → plan of IR events (no server, no protocol)."""

from __future__ import annotations

import json

import pytest

from mockupstream import scenarios
from mockupstream.scenarios import Ending, JsonMode, Pause, Raw
from translation import fold, ir, sse

WEATHER = ir.Tool("get_weather", "Weather", {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                   "celsius": {"type": "boolean"}, "extra": {"type": "object"},
                   "maybe": {"type": ["null", "number"]}},
})
CLOCK = ir.Tool("get_time", None, {"type": "object", "properties": {}})


def request(model: str, text: str = "What is the weather in Paris?", **kw: object) -> ir.Request:
    return ir.Request(model=model, messages=[ir.Message("user", [ir.TextPart(text)])], **kw)  # type: ignore[arg-type]


def answer(model: str, **kw: object) -> ir.Response:
    return fold.fold(scenarios.plan(request(model, **kw), "openai_chat").answer)


def text_of(resp: ir.Response) -> str:
    return "".join(b.text for b in resp.blocks if b.kind == "text")


def deltas(plan: scenarios.Plan) -> list[ir.BlockDelta]:
    return [s for s in plan.steps if isinstance(s, ir.BlockDelta)]


@pytest.mark.parametrize("model", ["mock-text", "gpt-5-mini", "claude-sonnet-4-6", "whatever"])
def test_unknown_models_get_the_plain_text_in_several_deltas(model: str) -> None:
    plan = scenarios.plan(request(model), "anthropic")
    resp = fold.fold(plan.steps)  # type: ignore[arg-type]
    assert text_of(resp) == scenarios.HELLO
    assert len(deltas(plan)) > 3
    assert resp.finish == ir.Finish(ir.FinishReason.STOP)
    assert resp.usage.output_tokens == len(deltas(plan))
    assert plan.ending is Ending.FINISH and plan.json_mode is JsonMode.ANSWER


def test_input_tokens_estimate_counts_every_text_of_the_request() -> None:
    req = ir.Request(model="m", system=[ir.TextPart("s" * 8)], messages=[
        ir.Message("user", [ir.TextPart("u" * 10)]),
        ir.Message("assistant", [ir.ReasoningPart("r" * 4), ir.ToolCallPart("c", "f", "{}")]),
        ir.Message("user", [ir.ToolResultPart("c", [ir.TextPart("t" * 6)])]),
    ])
    assert scenarios.estimate_input_tokens(req) == (8 + 10 + 4 + 2 + 6) // 4
    assert scenarios.estimate_input_tokens(request("m", text="")) == 1
    first = scenarios.plan(req, "responses").steps[0]
    assert isinstance(first, ir.MessageStart) and first.usage == ir.Usage(input_tokens=7)


def test_arguments_are_built_from_the_tool_schema() -> None:
    assert scenarios.arguments_for(WEATHER.parameters) == {
        "city": "Paris", "days": 21, "celsius": True, "extra": None, "maybe": 21}
    assert scenarios.arguments_for({"type": "object"}) == {}
    assert scenarios.arguments_for(None) == {}


def test_tool_model_calls_the_first_tool_in_several_fragments() -> None:
    plan = scenarios.plan(request("mock-tool", tools=[WEATHER, CLOCK]), "anthropic")
    resp = fold.fold(plan.answer)
    (call,) = resp.blocks
    assert call.kind == "tool_call" and call.name == "get_weather"
    assert call.id is not None and call.id.startswith("call_") and len(call.id) > 10
    assert json.loads(call.text) == scenarios.arguments_for(WEATHER.parameters)
    assert len(deltas(plan)) > 1
    assert resp.finish is not None and resp.finish.reason is ir.FinishReason.TOOL_CALLS


def test_tool_without_properties_gets_empty_object() -> None:
    resp = answer("mock-tool", tools=[CLOCK])
    assert json.loads(resp.blocks[0].text) == {}


def test_parallel_model_calls_two_tools_with_distinct_ids() -> None:
    resp = answer("mock-parallel", tools=[WEATHER, CLOCK])
    assert [b.name for b in resp.blocks] == ["get_weather", "get_time"]
    assert len({b.id for b in resp.blocks}) == 2
    only_one = answer("mock-parallel", tools=[CLOCK])
    assert [b.name for b in only_one.blocks] == ["get_time", "get_time"]
    assert only_one.blocks[0].id != only_one.blocks[1].id


@pytest.mark.parametrize("model", ["mock-tool", "mock-parallel"])
def test_tool_results_in_the_last_user_message_get_a_text_answer(model: str) -> None:
    req = ir.Request(model=model, tools=[WEATHER], messages=[
        ir.Message("user", [ir.TextPart("weather?")]),
        ir.Message("assistant", [ir.ToolCallPart("call_1", "get_weather", "{}"),
                                 ir.ToolCallPart("call_2", "get_weather", "{}")]),
        ir.Message("user", [ir.ToolResultPart("call_1", [ir.TextPart("22C")]),
                            ir.ToolResultPart("call_2", [ir.TextPart(" sunny")])]),
    ])
    resp = fold.fold(scenarios.plan(req, "openai_chat").answer)
    assert text_of(resp) == "Tool result received: 22C sunny"
    assert resp.finish is not None and resp.finish.reason is ir.FinishReason.STOP


def test_tool_model_without_tools_falls_back_to_text() -> None:
    assert text_of(answer("mock-tool")) == scenarios.HELLO


def test_reasoning_model_thinks_with_a_signature_then_answers() -> None:
    plan = scenarios.plan(request("mock-reasoning"), "anthropic")
    resp = fold.fold(plan.answer)
    thinking, text = resp.blocks
    assert thinking.kind == "reasoning" and thinking.text == scenarios.THINKING
    assert thinking.signature is not None and thinking.signature.startswith("sig-")
    assert text.text == scenarios.HELLO
    reasoning_deltas = [d for d in deltas(plan) if d.kind == "reasoning"]
    assert resp.usage.reasoning_tokens == len(reasoning_deltas) > 1
    assert resp.usage.output_tokens == len([d for d in deltas(plan) if d.kind != "signature"])


def test_long_model_streams_200_deltas() -> None:
    assert len(deltas(scenarios.plan(request("mock-long"), "responses"))) == 200


@pytest.mark.parametrize(("model", "count", "ms"), [("mock-slow", 64, 20), ("mock-slow-5x100", 5, 100)])
def test_slow_model_pauses_between_deltas(model: str, count: int, ms: int) -> None:
    plan = scenarios.plan(request(model), "openai_chat")
    assert len(deltas(plan)) == count
    pauses = [s for s in plan.steps if isinstance(s, Pause)]
    assert len(pauses) == count - 1 and all(p.seconds == ms / 1000 for p in pauses)
    assert plan.json_delay == pytest.approx(count * ms / 1000)


def test_delay_model_waits_before_the_first_event() -> None:
    plan = scenarios.plan(request("mock-delay-1500"), "anthropic")
    assert plan.steps[0] == Pause(1.5)
    assert text_of(fold.fold(plan.answer)) == scenarios.HELLO


def test_nonstandard_only_on_the_chat_endpoint() -> None:
    assert scenarios.plan(request("mock-nonstandard"), "openai_chat").nonstandard
    for protocol in ("anthropic", "responses"):
        plan = scenarios.plan(request("mock-nonstandard"), protocol)
        assert not plan.nonstandard and text_of(fold.fold(plan.answer)) == scenarios.HELLO


def test_nonstandard_encoder_writes_chat_completion_objects_without_done() -> None:
    encoder = scenarios.NonstandardChatEncoder()
    wire = b"".join(c for e in scenarios.plan(request("mock-nonstandard"), "openai_chat").steps
                    for c in encoder.feed(e))  # type: ignore[arg-type]
    wire += b"".join(encoder.finish())
    chunks = [sse.loads(e.data) for e in sse.SSEParser().feed(wire)]
    assert b"[DONE]" not in wire
    assert {c["object"] for c in chunks} == {"chat.completion"}
    assert {c["model"] for c in chunks} == {""}
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["id"].startswith("stream:chat:")
    assert all("role" not in c["choices"][0]["delta"] for c in chunks)
    assert "".join(c["choices"][0]["delta"]["content"] for c in chunks) == scenarios.HELLO
    assert [c["choices"][0]["finish_reason"] for c in chunks][-2:] == [None, "stop"]


@pytest.mark.parametrize(("model", "ending", "json_mode", "count"), [
    ("mock-disconnect", Ending.ABORT, JsonMode.ABORT, 3),
    ("mock-truncated", Ending.TRUNCATE, JsonMode.ANSWER, 6),
    ("mock-stall", Ending.STALL, JsonMode.STALL, 2),
])
def test_cut_streams_stop_without_finish(model: str, ending: Ending, json_mode: JsonMode,
                                         count: int) -> None:
    plan = scenarios.plan(request(model), "anthropic")
    assert plan.ending is ending and plan.json_mode is json_mode
    assert len(deltas(plan)) == count
    assert not any(isinstance(s, ir.Finish | ir.Usage | ir.BlockStop) for s in plan.steps)
    full = fold.fold(plan.answer)  # the JSON answer is complete
    assert text_of(full) == scenarios.HELLO and full.finish is not None


def test_malformed_line_sits_between_deltas() -> None:
    steps = scenarios.plan(request("mock-malformed"), "openai_chat").steps
    raw_at = next(i for i, s in enumerate(steps) if isinstance(s, Raw))
    assert steps[raw_at] == Raw(b"data: {not json\n\n")
    assert len([s for s in steps[:raw_at] if isinstance(s, ir.BlockDelta)]) == 2
    assert len([s for s in steps[raw_at:] if isinstance(s, ir.BlockDelta)]) == 4
    assert isinstance(steps[-1], ir.Finish)


@pytest.mark.parametrize(("key", "status"), [
    ("sk-fail-429-x", 429), ("sk-fail-401", 401), ("fail-402", 402), ("a-fail-403-cost-b", 403),
    ("fail-403-tokens", 403), ("fail-500", 500), ("fail-stream-error", 429),
])
def test_fault_markers_anywhere_in_the_key(key: str, status: int) -> None:
    fault = scenarios.fault_for_key(key)
    assert fault is not None and fault.status == status
    assert fault.in_stream == (key == "fail-stream-error")


def test_fault_messages_and_headers() -> None:
    assert "estimated cost exceeds the limit for this request" in scenarios.fault_for_key("fail-403-cost").message  # type: ignore[union-attr]
    assert "insufficient tokens" in scenarios.fault_for_key("fail-403-tokens").message  # type: ignore[union-attr]
    assert scenarios.fault_for_key("fail-429").headers == {"Retry-After": "30"}  # type: ignore[union-attr]
    assert scenarios.fault_for_key("sk-good-account") is None


def test_stream_error_plan_errors_right_after_the_start() -> None:
    rate_limit = scenarios.fault_for_key("fail-stream-error")
    overloaded = scenarios.fault_for_key("fail-stream-overloaded")
    assert rate_limit is not None and overloaded is not None
    for protocol, fault, status in (("anthropic", overloaded, 529), ("anthropic", rate_limit, 429),
                                    ("openai_chat", rate_limit, 429), ("responses", rate_limit, 429)):
        plan = scenarios.stream_error_plan(request("mock-text"), protocol, fault)
        start, error = plan.steps
        assert isinstance(start, ir.MessageStart)
        assert isinstance(error, ir.Error) and error.status == status
        assert plan.close_connection
    assert scenarios.stream_error(overloaded).error_type == "overloaded_error"
    assert scenarios.stream_error(rate_limit).code == "rate_limit_exceeded"
    assert scenarios.stream_error(rate_limit).error_type == "rate_limit_error"
