"""Hand-made transcripts (tests/fixtures/anthropic/*.sse) for what the recordings lack."""

import json

from tests.translation.summary import summary_of
from translation import fold, ir

from .helpers import FIXTURES, check_anthropic_wire, check_ir_stream, comparable, decode, encode, fixture, wire_events
from .sdk_readback import summary_from_stream


def test_every_hand_made_transcript_says_so_and_decodes_well_formed() -> None:
    names = sorted(p.name for p in FIXTURES.glob("*.sse"))
    assert names == ["overloaded_error_midstream.sse", "parallel_tool_use.sse", "redacted_thinking_text.sse",
                     "thinking_text_tool.sse", "truncated.sse"]
    for name in names:
        wire = fixture(name)
        assert wire.startswith(b": hand-made")
        check_ir_stream(decode(wire))
        check_anthropic_wire(encode(decode(wire)))


def test_overloaded_error_mid_stream_then_connection_close() -> None:
    events = decode(fixture("overloaded_error_midstream.sse"))
    assert events[-2:] == [ir.BlockStop(0), ir.Error(message="Overloaded", error_type="overloaded_error", status=529)]
    resp = fold.fold(events)
    assert resp.blocks[0].text == "The capital of France is Paris, and" and resp.finish is None
    client = summary_from_stream(encode(events))
    assert client.error == "Overloaded" and client.text == "The capital of France is Paris, and"


def test_truncated_stream_closes_the_open_tool_call_and_reports_truncation() -> None:
    events = decode(fixture("truncated.sse"))
    assert events[-2:] == [ir.BlockStop(1), ir.transport_error(ir.TransportFailure.TRUNCATED, "upstream stream ended before completion")]
    resp = fold.fold(events)
    assert resp.blocks[1].id == "toolu_01HandMadeTruncated1" and resp.blocks[1].text == '{"query": "wea'
    assert resp.usage == ir.Usage(input_tokens=430, cached_tokens=120, cache_creation_tokens=0)
    client = summary_from_stream(encode(events))
    assert client.error == "upstream stream ended before completion" and client.text == "Let me look that up."


def test_thinking_signature_then_text_then_tool_use() -> None:
    events = decode(fixture("thinking_text_tool.sse"))
    resp = fold.fold(events)
    thinking, text, tool = resp.blocks
    assert thinking.text == "The user wants the weather in Paris. I should call get_weather."
    assert thinking.signature == "EqQBCkYIBxgCIkBHandMadeSignatureForThinkingBlock=="
    assert text.text == "Let me check the weather."
    assert (tool.id, tool.name, json.loads(tool.text)) == ("toolu_01HandMadeWeather0001", "get_weather",
                                                           {"city": "Paris", "unit": "c"})
    assert resp.finish == ir.Finish(ir.FinishReason.TOOL_CALLS, raw="tool_use")
    assert resp.usage == ir.Usage(input_tokens=512 + 1024 + 2048, output_tokens=87, cached_tokens=2048,
                                  cache_creation_tokens=1024, reasoning_tokens=40)
    assert comparable(summary_from_stream(encode(events))) == comparable(summary_of(resp))


def test_two_parallel_tool_use_blocks_stay_apart() -> None:
    resp = fold.fold(decode(fixture("parallel_tool_use.sse")))
    calls = [(b.id, b.name, json.loads(b.text)) for b in resp.blocks if b.kind == "tool_call"]
    assert calls == [("toolu_01HandMadeParallelSF01", "get_weather", {"city": "San Francisco"}),
                     ("toolu_01HandMadeParallelNY02", "get_weather", {"city": "New York"})]
    client = summary_from_stream(encode(decode(fixture("parallel_tool_use.sse"))))
    assert client.tool_calls == calls and client.finish == ir.FinishReason.TOOL_CALLS


def test_redacted_thinking_then_text() -> None:
    events = decode(fixture("redacted_thinking_text.sse"))
    redacted, text = fold.fold(events).blocks
    assert redacted.kind == "reasoning" and redacted.redacted is not None
    assert redacted.redacted.endswith("HandMadeRedactedPayload") and text.text == "Here is my answer."
    wire = encode(events)
    blocks = [p["content_block"] for _, p in check_anthropic_wire(wire) if p["type"] == "content_block_start"]
    assert blocks[0] == {"type": "redacted_thinking", "data": redacted.redacted}


def test_anthropic_to_anthropic_round_trip_keeps_the_fold() -> None:
    for path in sorted(FIXTURES.glob("*.sse")):
        events = decode(path.read_bytes())
        again = fold.fold(decode(encode(events)))
        original = fold.fold(events)
        assert again.blocks == original.blocks, path.name
        assert again.finish == original.finish and again.error == original.error or (
            original.error is not None and again.error is not None
            and again.error.message == original.error.message), path.name


def test_reencoding_an_anthropic_stream_gives_the_upstream_blocks_back_event_for_event() -> None:
    wire = fixture("thinking_text_tool.sse")
    upstream = [p for _, p in wire_events(wire) if p["type"].startswith("content_block")]
    ours = [p for _, p in check_anthropic_wire(encode(decode(wire))) if p["type"].startswith("content_block")]
    # The empty first input_json_delta carries nothing and is not repeated.
    assert ours == [p for p in upstream if p.get("delta") != {"type": "input_json_delta", "partial_json": ""}]
    [delta] = [p for _, p in wire_events(encode(decode(wire))) if p["type"] == "message_delta"]
    assert delta == {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                     "usage": {"input_tokens": 512, "output_tokens": 87, "cache_creation_input_tokens": 1024,
                               "cache_read_input_tokens": 2048, "output_tokens_details": {"thinking_tokens": 40}}}
