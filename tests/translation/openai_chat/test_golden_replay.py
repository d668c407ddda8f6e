"""Every recorded Chat upstream through SSEParser → ChatStreamDecoder, with facts
read from specific recordings checked one by one."""

import json
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from tests.fixtures.recorded_loader import ROOT, Recording, recordings
from translation import fold, ir
from translation.openai_chat import parse_error, parse_response

from .helpers import check_ir_stream, decode, terminal

STREAMS = recordings(protocol="openai_chat", stream=True)
BODIES = recordings(protocol="openai_chat", stream=False)
F = ir.FinishReason


def named(fragment: str) -> Recording:
    [rec] = [r for r in STREAMS if fragment in r.name]
    return rec


def replay(fragment: str) -> tuple[list[ir.Event], ir.Response]:
    events = decode(named(fragment).body)
    return events, fold.fold(events)


def tool_calls(resp: ir.Response) -> list[tuple[str | None, str | None, Any]]:
    return [(b.id, b.name, json.loads(b.text)) for b in resp.blocks if b.kind == "tool_call"]


def texts(resp: ir.Response, kind: str) -> str:
    return "".join(b.text for b in resp.blocks if b.kind == kind)


def test_the_recordings_are_there() -> None:
    assert len(STREAMS) >= 30 and any(r.status >= 400 for r in BODIES)


@pytest.mark.parametrize("rec", STREAMS, ids=lambda r: r.name)
def test_every_stream_decodes_to_a_well_formed_ir_stream(rec: Recording) -> None:
    events = decode(rec.body)
    check_ir_stream(events)


@pytest.mark.parametrize("rec", STREAMS, ids=lambda r: r.name)
def test_byte_chunking_does_not_change_the_events(rec: Recording) -> None:
    whole = decode(rec.body)
    assert decode(rec.body, chunk_size=7) == whole
    assert decode(rec.body.replace(b"\n", b"\r\n"), chunk_size=64) == whole


@pytest.mark.parametrize("rec", [r for r in BODIES if r.status < 400], ids=lambda r: r.name)
def test_every_json_body_parses(rec: Recording) -> None:
    resp = parse_response(rec.body)
    assert resp.blocks and resp.finish is not None


@pytest.mark.parametrize("rec", [r for r in BODIES if r.status >= 400], ids=lambda r: r.name)
def test_every_error_recording_goes_through_parse_error(rec: Recording) -> None:
    err = parse_error(rec.status, rec.body)
    assert err.status == rec.status and err.message


# ------------------------------------------------------------ facts per recording


def test_alibaba_empty_follow_up_ids_do_not_overwrite_the_call_id() -> None:
    events, resp = replay("alibaba-tool-call")
    assert tool_calls(resp) == [("call_eee11723464a4b9eb8cee71d", "weather", {"location": "San Francisco"})]
    assert resp.finish == ir.Finish(F.TOOL_CALLS, raw="tool_calls")
    assert resp.usage == ir.Usage(input_tokens=295, output_tokens=22, cached_tokens=0)


def test_groq_whole_tool_call_in_one_delta() -> None:
    events, resp = replay("groq-tool-call")
    assert tool_calls(resp) == [("tk85n1k4m", "weather", {})]
    assert resp.usage.input_tokens == 210 and resp.usage.output_tokens == 15


def test_groq_usage_only_in_x_groq() -> None:
    _, resp = replay("test_groq_model_thinking_part_iter.yaml#0")
    assert resp.usage == ir.Usage(input_tokens=21, output_tokens=988)
    assert texts(resp, "text").startswith("<think>\nOkay")  # inline think tags stay text


def test_groq_reasoning_field_deltas() -> None:
    _, resp = replay("test_groq_model_thinking_part_iter.yaml#1")
    assert [b.kind for b in resp.blocks] == ["reasoning", "text"]
    assert texts(resp, "reasoning").startswith("Alright, so")
    assert texts(resp, "text").endswith("optional chocolate coating.")
    assert resp.usage.input_tokens == 573 and resp.usage.output_tokens == 1509


def test_groq_error_event_after_reasoning() -> None:
    events, resp = replay("test_tool_use_failed_error_streaming.yaml#0")
    err = terminal(events)
    assert isinstance(err, ir.Error)
    assert (err.status, err.error_type, err.code) == (400, "invalid_request_error", "tool_use_failed")
    assert err.message.startswith("Tool call validation failed")
    assert texts(resp, "reasoning").startswith("We need to")


def test_groq_error_event_after_text() -> None:
    events, resp = replay("test_tool_use_failed_error_streaming_with_text.yaml#0")
    err = terminal(events)
    assert isinstance(err, ir.Error) and err.message == "Tool choice is required, but model did not call a tool"
    assert texts(resp, "text") == "maybe"


def test_groq_tool_call_with_reasoning_tokens() -> None:
    _, resp = replay("test_tool_use_failed_error_streaming.yaml#1")
    assert tool_calls(resp) == [("fc_bfb39741-3748-4def-9886-a93fc9c64a90", "get_something_by_name",
                                 {"name": "example"})]
    assert resp.usage == ir.Usage(input_tokens=304, output_tokens=49, reasoning_tokens=23)


def test_openai_parallel_tool_calls_are_never_merged() -> None:
    _, resp = replay("f82268f2fefd5cfbc7eeb59c297688be2f6ca0849a6e4f17851b517310841d9b")
    calls = tool_calls(resp)
    assert [(c[0], c[1]) for c in calls] == [("call_JMW1whyEaYG438VE1OIflxA2", "GetWeatherArgs"),
                                             ("call_DNYTawLBoN8fj3KN6qU9N1Ou", "get_stock_price")]
    assert calls[0][2]["city"] == "Edinburgh"
    assert calls[1][2] == {"ticker": "AAPL", "exchange": "NASDAQ"}
    assert resp.usage == ir.Usage(input_tokens=149, output_tokens=60, reasoning_tokens=0)


def test_n3_recording_serves_only_choice_zero() -> None:
    rec = named("a491adda08c3d4fde95f5b2ee3f60f7f745f1a56d82e62f58031cc2add502380")
    expected = ""
    for line in rec.body.decode().splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                if choice["index"] == 0:
                    expected += choice["delta"].get("content") or ""
    _, resp = replay("a491adda08c3d4fde95f5b2ee3f60f7f745f1a56d82e62f58031cc2add502380")
    assert len(resp.blocks) == 1 and texts(resp, "text") == expected
    assert resp.usage.output_tokens == 42  # the usage covers all three choices; it is what was billed


def test_refusal_deltas_become_a_refusal_block() -> None:
    _, resp = replay("173417d553406f034f643e5db3f8d591fb691ebac56f5ae39a22cc7d455c5353")
    assert [b.kind for b in resp.blocks] == ["refusal"]
    assert texts(resp, "refusal") == "I'm sorry, I can't assist with that request."
    assert resp.finish == ir.Finish(F.REFUSAL, raw="stop")
    _, with_logprobs = replay("569c877e69429d4cbc1577d2cd6dd33878095c68badc6b6654a69769b391a1c1")
    [refusal] = with_logprobs.blocks
    assert refusal.text == "I'm very sorry, but I can't assist with that."
    assert "".join(t["token"] for t in refusal.logprobs) == refusal.text  # logprobs.refusal, token by token
    assert refusal.logprobs[1] == {"token": " very", "logprob": -0.8438816, "bytes": [32, 118, 101, 114, 121],
                                   "top_logprobs": []}


def test_content_logprobs_ride_on_the_text_block() -> None:
    events, resp = replay("83b060bae42eb41c4f1edbb7c1542b954b37d9dfd1910b964ddebc9677e6ae85")
    [text] = resp.blocks
    assert [t["token"] for t in text.logprobs] == ["Foo", "!"] and text.text == "Foo!"
    kinds = [e.kind for e in events if isinstance(e, ir.BlockDelta)]
    assert kinds == ["logprobs", "text", "logprobs", "text"]  # each before the text it describes


def test_length_finish() -> None:
    _, resp = replay("4cc50a6135d254573a502310e6af1246f55edb6ad95fa24059f160996b68866d")
    assert resp.finish == ir.Finish(F.LENGTH, raw="length") and texts(resp, "text") == '{"'


def test_azure_prompt_filter_first_chunk_and_usage_only_last_chunk() -> None:
    events, resp = replay("azure-model-router")
    assert events[0] == ir.MessageStart(id="chatcmpl-CYPS1lijGoK8gd9lYzY3r9Sx50nbt", model="gpt-5-nano-2025-08-07")
    assert texts(resp, "text") == "Capital of Denmark."
    assert resp.usage == ir.Usage(input_tokens=15, output_tokens=78, cached_tokens=0, reasoning_tokens=64)


def test_azure_deepseek_explicit_nulls() -> None:
    _, resp = replay("azure-deepseek-reasoning")
    assert [b.kind for b in resp.blocks] == ["reasoning", "text"]
    assert texts(resp, "reasoning").startswith("We need to invent a new")
    assert texts(resp, "text").endswith("logo! 🎯🧡💙")
    assert resp.usage == ir.Usage(input_tokens=19, output_tokens=1720, reasoning_tokens=0)


def test_deepseek_reasoning_then_tool_call_with_cache_hits() -> None:
    _, resp = replay("deepseek-tool-call")
    assert [b.kind for b in resp.blocks] == ["reasoning", "tool_call"]
    assert tool_calls(resp) == [("call_00_ioIn7yN9p1ZOMNpDLwd4MgAF", "weather", {"location": "San Francisco"})]
    assert resp.usage == ir.Usage(input_tokens=339, output_tokens=83, cached_tokens=320, reasoning_tokens=39)


def test_deepseek_reasoning_then_text() -> None:
    _, resp = replay("deepseek-reasoning.chunks")
    assert [b.kind for b in resp.blocks] == ["reasoning", "text"]
    assert resp.usage == ir.Usage(input_tokens=18, output_tokens=219, cached_tokens=0, reasoning_tokens=205)


def test_moonshot_finish_and_usage_on_the_same_chunk() -> None:
    _, resp = replay("moonshotai-stream")
    assert (texts(resp, "reasoning"), texts(resp, "text")) == ("Thinking aloud. ", "Hello!")
    assert resp.finish == ir.Finish(F.STOP, raw="stop")
    assert resp.usage == ir.Usage(input_tokens=9, output_tokens=12, reasoning_tokens=7)


def test_xai_reasoning_and_completion_tokens_corrected() -> None:
    _, resp = replay("xai-tool-call")
    assert tool_calls(resp) == [("call_79382389", "weather", {"location": "San Francisco"})]
    assert resp.usage == ir.Usage(input_tokens=307, output_tokens=253, cached_tokens=306, reasoning_tokens=227)


def test_zai_reasoning_content_with_repeated_role() -> None:
    _, resp = replay("test_zai_thinking_stream")
    assert [b.kind for b in resp.blocks] == ["reasoning", "text"]
    assert texts(resp, "text") == "4"
    assert resp.usage == ir.Usage(input_tokens=13, output_tokens=564, cached_tokens=0, reasoning_tokens=561)


def test_openrouter_error_object_after_finish_reason_length() -> None:
    events, resp = replay("test_openrouter_stream_error")
    err = terminal(events)
    assert isinstance(err, ir.Error) and (err.status, err.message, err.code) == (400, "Token limit reached", "400")
    assert resp.finish is None
    assert texts(resp, "reasoning") == "We need to respond to a greeting. The user"
    assert resp.usage == ir.Usage(input_tokens=43, output_tokens=10, cached_tokens=0, reasoning_tokens=11)


def test_openrouter_usage_chunk_after_finish() -> None:
    _, resp = replay("test_openrouter_streaming_reasoning")
    assert [b.kind for b in resp.blocks] == ["reasoning", "text"]
    assert texts(resp, "text") == "2 + 2 = 4"
    assert resp.usage == ir.Usage(input_tokens=43, output_tokens=36, cached_tokens=0, reasoning_tokens=13)


def test_moderation_chunk_is_harmless() -> None:
    events, resp = replay("test_openai_moderation_stream")
    assert texts(resp, "text") == "Paris." and resp.finish == ir.Finish(F.STOP, raw="stop")


def test_tool_call_then_text_in_two_interactions() -> None:
    _, first = replay("test_run_stream_sync_streams_real_model.yaml#0")
    _, second = replay("test_run_stream_sync_streams_real_model.yaml#1")
    assert tool_calls(first) == [("call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital", {"country": "UK"})]
    assert texts(second, "text") == "The capital of the UK is London."


def test_tool_index_starting_at_one_after_text() -> None:
    _, resp = replay("anthropic-fallback-tool-call")
    assert texts(resp, "text") == "Reading it."
    assert tool_calls(resp) == [("toolu_sanitized", "read_file", {"path": "a.txt"})]
    assert resp.usage == ir.Usage()  # this upstream sent no usage


def test_openai_text_with_obfuscation_field() -> None:
    _, resp = replay("openai-text.chunks")
    assert texts(resp, "text").startswith("**Holiday Name:**")
    assert resp.usage == ir.Usage(input_tokens=16, output_tokens=300, cached_tokens=0, reasoning_tokens=0)


# ------------------------------------------------------------ error bodies, read from the cassettes


def cassette_error(path: str, n: int = 0) -> tuple[int, Any]:
    doc = yaml.safe_load((ROOT / path).read_text())
    response = doc["interactions"][n]["response"]
    return int(response["status"]["code"]), response["parsed_body"]


def test_openai_400_error_body() -> None:
    status, body = cassette_error("pydantic-ai/tests/models/cassettes/test_openai/"
                                  "test_openai_o1_mini_system_role[developer].yaml")
    err = parse_error(status, body)
    assert err == ir.Error(message="Unsupported value: 'messages[0].role' does not support 'developer' with this model.",
                           error_type="invalid_request_error", status=400, code="unsupported_value",
                           param="messages[0].role")


def test_openrouter_429_error_bodies() -> None:
    for n in range(3):
        status, body = cassette_error("pydantic-ai/tests/models/cassettes/test_openrouter/"
                                      "test_openrouter_errors_raised.yaml", n)
        err = parse_error(status, body)
        assert (err.status, err.message, err.code) == (429, "Provider returned error", "429")


def test_reasoning_model_legacy_parameter_error_body() -> None:
    raw = (ROOT / "vercel-ai/packages/openai/src/chat/__fixtures__/"
           "reasoning-model-legacy-parameter-error.json").read_bytes()
    err = parse_error(400, raw)
    assert (err.error_type, err.code) == ("invalid_request_error", "unsupported_parameter")
    assert err.message.startswith("Unsupported parameter: 'max_tokens'")
