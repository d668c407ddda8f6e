import json
from typing import Any

from translation import anthropic, fold, ir, sse
from translation.sse import SSEEvent

from .helpers import RECORDED, check_ir_stream, decode, decode_with, recordings

VERCEL = RECORDED / "vercel-ai/packages/anthropic/src/__fixtures__"


def ev(payload: Any, event: str | None = None, raw: str | None = None) -> SSEEvent:
    data = raw if raw is not None else json.dumps(payload)
    name = event if event is not None else (payload.get("type") if isinstance(payload, dict) else None)
    return SSEEvent(data=data, event=name)


def run(*events: SSEEvent, finish: bool = True) -> list[ir.Event]:
    decoder = anthropic.stream_decoder()
    out: list[ir.Event] = []
    for e in events:
        out += decoder.feed(e)
    if finish:
        out += decoder.finish()
    return out


def recorded_wire(suffix: str) -> bytes:
    [rec] = [r for r in recordings(stream=True) if r.name.endswith(suffix)]
    return rec.body


def frame_jsonl(name: str) -> bytes:
    """A vercel ``.chunks.txt`` re-framed whole (the shared loader splits it per message)."""

    lines = [ln for ln in (VERCEL / name).read_text().splitlines() if ln.strip()]
    return "".join(f"event: {json.loads(ln)['type']}\ndata: {ln}\n\n" for ln in lines).encode()


START = {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                                              "model": "claude-x", "stop_reason": None, "stop_sequence": None,
                                              "usage": {"input_tokens": 10, "cache_read_input_tokens": 100,
                                                        "cache_creation_input_tokens": 5, "output_tokens": 1}}}


def block_start(index: int, block: dict[str, Any]) -> SSEEvent:
    return ev({"type": "content_block_start", "index": index, "content_block": block})


def delta(index: int, d: dict[str, Any]) -> SSEEvent:
    return ev({"type": "content_block_delta", "index": index, "delta": d})


def stop(index: int) -> SSEEvent:
    return ev({"type": "content_block_stop", "index": index})


END = [ev({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
           "usage": {"output_tokens": 9}}), ev({"type": "message_stop"})]


# ----------------------------------------------------------------- the happy path


def test_message_start_carries_id_model_and_total_input_usage() -> None:
    out = run(ev(START), *END)
    assert out[0] == ir.MessageStart(id="msg_1", model="claude-x",
                                     usage=ir.Usage(input_tokens=115, cached_tokens=100, cache_creation_tokens=5))


def test_padded_json_and_spaced_ping_are_fine_and_ping_is_not_unknown() -> None:
    events, decoder = decode_with(recorded_wire("test_anthropic_model_thinking_part_redacted_stream.yaml#0"))
    check_ir_stream(events)
    assert decoder.unknown_events == 0
    assert run(ev(START), ev(None, event="ping", raw='{"type": "ping"}'), *END)[1] == \
        ir.Usage(input_tokens=115, output_tokens=9, cached_tokens=100, cache_creation_tokens=5)


CITED = {"type": "web_search_result_location", "cited_text": "Hi there", "url": "https://e.x/a", "title": "A",
         "encrypted_index": "Eo8B"}


def test_every_block_kind_and_delta() -> None:
    out = run(ev(START),
              block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
              delta(0, {"type": "thinking_delta", "thinking": "hmm"}),
              delta(0, {"type": "signature_delta", "signature": "sig"}), stop(0),
              block_start(1, {"type": "redacted_thinking", "data": "opaque"}), stop(1),
              block_start(2, {"type": "text", "text": ""}),
              delta(2, {"type": "text_delta", "text": "Hi"}),
              delta(2, {"type": "citations_delta", "citation": CITED}), stop(2),
              block_start(3, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}),
              delta(3, {"type": "input_json_delta", "partial_json": ""}),
              delta(3, {"type": "input_json_delta", "partial_json": '{"a":'}),
              delta(3, {"type": "input_json_delta", "partial_json": " 1}"}), stop(3), *END)
    check_ir_stream(out)
    assert out[1:] == [
        ir.BlockStart(0, "reasoning"), ir.BlockDelta(0, "reasoning", "hmm"), ir.BlockDelta(0, "signature", "sig"),
        ir.BlockStop(0),
        ir.BlockStart(1, "reasoning"), ir.BlockDelta(1, "redacted", "opaque"), ir.BlockStop(1),
        ir.BlockStart(2, "text"), ir.BlockDelta(2, "text", "Hi"),
        ir.BlockDelta(2, "citation", "", data={
            "type": "url_citation", "url": "https://e.x/a", "title": "A", "cited_text": "Hi there",
            "start_index": 0, "end_index": 2, "raw": CITED}),
        ir.BlockStop(2),
        ir.BlockStart(3, "tool_call", id="toolu_1", name="f"), ir.BlockDelta(3, "arguments", '{"a":'),
        ir.BlockDelta(3, "arguments", " 1}"), ir.BlockStop(3),
        ir.Usage(input_tokens=115, output_tokens=9, cached_tokens=100, cache_creation_tokens=5),
        ir.Finish(ir.FinishReason.STOP, raw="end_turn"),
    ]


def test_every_citations_delta_becomes_a_citation_at_its_block_stop() -> None:
    wire = recorded_wire("test_anthropic_web_search_tool_stream.yaml#0")
    events, decoder = decode_with(wire)
    check_ir_stream(events)
    assert decoder.unknown_events == 0
    cites = [e for e in events if isinstance(e, ir.BlockDelta) and e.kind == "citation"]
    assert len(cites) == wire.count(b'"type":"citations_delta"') > 0
    for cite in cites:  # each spans its whole block, which is over once the citation is emitted
        assert cite.data is not None and cite.data["type"] == "url_citation" and cite.data["start_index"] == 0
        position = events.index(cite)
        assert isinstance(events[position + 1], ir.BlockDelta | ir.BlockStop)


def test_server_tool_use_input_deltas_are_folded_into_the_raw_block() -> None:
    events = decode(recorded_wire("test_anthropic_web_search_tool_stream.yaml#0"))
    starts = [e for e in events if isinstance(e, ir.BlockStart) and e.kind == "server_tool"]
    uses = [s.raw for s in starts if s.raw and s.raw["type"] == "server_tool_use"]
    assert uses and all(s.raw_protocol == "anthropic" for s in starts)
    assert all(isinstance(u["input"], dict) and u["input"].get("query") for u in uses), uses
    # A server block is emitted whole: start immediately followed by its stop.
    for i, e in enumerate(events):
        if isinstance(e, ir.BlockStart) and e.kind == "server_tool":
            assert events[i + 1] == ir.BlockStop(e.index)


def test_usage_totals_on_message_delta_win_including_input_tokens() -> None:
    events = decode(recorded_wire("anthropic-message-delta-input-tokens.chunks.txt"))
    assert isinstance(events[0], ir.MessageStart) and events[0].usage == ir.Usage(input_tokens=43)
    assert fold.fold(events).usage.input_tokens == 61 and fold.fold(events).usage.output_tokens == 2


def test_usage_cache_fields_from_message_start_survive_a_partial_message_delta() -> None:
    out = run(ev(START), ev({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                             "usage": {"output_tokens": 3}}))
    assert fold.fold(out).usage == ir.Usage(input_tokens=115, output_tokens=3, cached_tokens=100,
                                            cache_creation_tokens=5)


def test_thinking_tokens_become_reasoning_tokens() -> None:
    out = run(ev(START), ev({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                             "usage": {"output_tokens": 30, "output_tokens_details": {"thinking_tokens": 12}}}))
    assert fold.fold(out).usage.reasoning_tokens == 12


def test_connection_close_after_message_stop_is_normal() -> None:
    decoder = anthropic.stream_decoder()
    for e in [ev(START), *END]:
        decoder.feed(e)
    assert decoder.finish() == [] and decoder.feed(ev(START)) == []


def test_finish_then_close_without_message_stop_is_not_an_error() -> None:
    out = run(ev(START), END[0])
    assert not any(isinstance(e, ir.Error) for e in out) and isinstance(out[-1], ir.Finish)


def test_message_stop_without_message_delta_finishes_with_end_turn() -> None:
    out = run(ev(START), ev({"type": "message_stop"}))
    assert out[-1] == ir.Finish(ir.FinishReason.STOP) and isinstance(out[-2], ir.Usage)


def test_message_start_with_content_and_stop_reason_programmatic_tool_calling() -> None:
    events = decode(recorded_wire("anthropic-programmatic-tool-calling.1.chunks.txt#1"))
    check_ir_stream(events)
    resp = fold.fold(events)
    [call] = resp.blocks
    assert (call.id, call.name, json.loads(call.text)) == ("toolu_015dGLMbwBKv1ZRQr6KdJzeH", "rollDie",
                                                           {"player": "player2"})
    assert resp.finish == ir.Finish(ir.FinishReason.TOOL_CALLS, raw="tool_use")


def test_tool_use_with_whole_input_at_start_and_no_deltas() -> None:
    resp = fold.fold(decode(recorded_wire("anthropic-programmatic-tool-calling.1.chunks.txt#0")))
    calls = [b for b in resp.blocks if b.kind == "tool_call"]
    assert json.loads(calls[-1].text) == {"player": "player1"}


def test_compaction_block_is_a_server_block_with_its_delta_merged() -> None:
    events, decoder = decode_with(recorded_wire("compaction_response.txt"))
    raw = fold.fold(events).blocks[0].raw
    assert raw == {"type": "compaction", "content": "Earlier conversation summarized.",
                   "encrypted_content": "EpwBCioIDxgCEAEYASJALd_opaque_compaction_payload"}
    assert decoder.unknown_events == 0


def test_events_before_message_start_get_a_synthetic_message_start() -> None:
    out = run(block_start(0, {"type": "text", "text": "Hi"}), stop(0), *END)
    check_ir_stream(out)
    assert out[0] == ir.MessageStart() and out[2] == ir.BlockDelta(0, "text", "Hi")


# ----------------------------------------------------------------- spliced and duplicated streams


def test_second_message_start_resets_the_index_mapping_spliced() -> None:
    wire = frame_jsonl("spliced-message-start.chunks.txt")
    assert wire.count(b"event: message_start") == 2
    events = decode(wire)
    check_ir_stream(events)
    resp = fold.fold(events)
    assert [(b.kind, b.id) for b in resp.blocks] == [("reasoning", None), ("tool_call", "toolu_first"),
                                                     ("reasoning", None), ("tool_call", "toolu_second")]
    assert [b.signature for b in resp.blocks if b.kind == "reasoning"] == ["sig-first", "sig-second"]
    assert json.loads(resp.blocks[3].text) == {"value": "Sparkle Day"}
    assert resp.id == "msg_first" and resp.finish is not None and resp.finish.raw == "tool_use"


def test_duplicate_message_start_is_not_a_second_message_start() -> None:
    events = decode(frame_jsonl("duplicate-message-start.chunks.txt"))
    check_ir_stream(events)
    assert fold.fold(events).blocks[0].text == "Hello, World!"


# ----------------------------------------------------------------- failures


def test_error_event_mid_stream_closes_the_block_and_ends() -> None:
    decoder = anthropic.stream_decoder()
    out: list[ir.Event] = []
    for e in [ev(START), block_start(0, {"type": "text", "text": ""}), delta(0, {"type": "text_delta", "text": "x"}),
              ev({"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}})]:
        out += decoder.feed(e)
    assert out[-2:] == [ir.BlockStop(0), ir.Error(message="Slow down", error_type="rate_limit_error", status=429)]
    assert decoder.feed(END[0]) == [] and decoder.finish() == []


def test_error_event_with_non_json_data() -> None:
    out = run(ev(START), SSEEvent(data="upstream exploded", event="error"))
    assert out[-1] == ir.Error(message="upstream exploded", error_type="api_error", status=500)


def test_error_before_message_start_still_starts_with_message_start() -> None:
    out = run(ev({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
    assert out == [ir.MessageStart(), ir.Error(message="Overloaded", error_type="overloaded_error", status=529)]


def test_stream_ending_without_message_stop_is_truncated_after_closing_the_block() -> None:
    out = run(ev(START), block_start(0, {"type": "text", "text": ""}), delta(0, {"type": "text_delta", "text": "x"}))
    assert out[-2:] == [ir.BlockStop(0), ir.transport_error(ir.TransportFailure.TRUNCATED, "upstream stream ended before completion")]


def test_empty_stream_is_truncated() -> None:
    assert run() == [ir.MessageStart(), ir.transport_error(ir.TransportFailure.TRUNCATED, "upstream stream ended before completion")]


def test_half_received_server_block_is_not_emitted_on_truncation() -> None:
    out = run(ev(START), block_start(0, {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}),
              delta(0, {"type": "input_json_delta", "partial_json": '{"q'}))
    check_ir_stream(out)
    assert not any(isinstance(e, ir.BlockStart) for e in out)


def malformed(out: list[ir.Event]) -> ir.Error:
    err = out[-1]
    assert isinstance(err, ir.Error) and err.error_type == "malformed_upstream" and err.status == 502
    return err


def test_invalid_json_is_malformed_and_ends_the_stream() -> None:
    decoder = anthropic.stream_decoder()
    decoder.feed(ev(START))
    out = decoder.feed(SSEEvent(data='{"type":"content_block_start",', event="content_block_start"))
    malformed(out)
    assert decoder.feed(ev(START)) == [] and decoder.finish() == []


def test_structurally_invalid_chunks_are_malformed() -> None:
    text0 = block_start(0, {"type": "text", "text": ""})
    cases = [
        [ev(None, event="message_start", raw="[1, 2]")],
        [ev({"type": "message_start", "message": "nope"})],
        [ev(START), ev({"type": "content_block_start", "content_block": {"type": "text"}})],
        [ev(START), ev({"type": "content_block_start", "index": 0, "content_block": {"text": ""}})],
        [ev(START), text0, ev({"type": "content_block_delta", "index": 0, "delta": "x"})],
        [ev(START), text0, delta(0, {"type": "text_delta"})],
        [ev(START), text0, delta(0, {"type": "input_json_delta", "partial_json": "{}"})],
        [ev(START), text0, text0],
        [ev(START), delta(4, {"type": "text_delta", "text": "x"})],
        [ev(START), stop(3)],
    ]
    for events in cases:
        out = run(*events, finish=False)
        malformed(out)
        check_ir_stream(out)


def test_fragment_for_an_already_closed_block_is_an_error_not_a_silent_drop() -> None:
    out = run(ev(START), block_start(0, {"type": "text", "text": ""}), stop(0),
              block_start(1, {"type": "text", "text": ""}), delta(0, {"type": "text_delta", "text": "late"}),
              finish=False)
    assert "already closed" in malformed(out).message
    assert out[-2] == ir.BlockStop(1)


def test_repeated_stop_is_harmless() -> None:
    out = run(ev(START), block_start(0, {"type": "text", "text": ""}), stop(0), stop(0), *END)
    check_ir_stream(out)


def test_unknown_events_and_deltas_are_counted_and_ignored() -> None:
    decoder = anthropic.stream_decoder()
    out: list[ir.Event] = []
    for e in [ev(START), ev({"type": "brand_new_event"}), block_start(0, {"type": "text", "text": ""}),
              delta(0, {"type": "brand_new_delta", "x": 1}), stop(0), SSEEvent(data="  ", event="ping"), *END]:
        out += decoder.feed(e)
    out += decoder.finish()
    check_ir_stream(out)
    assert decoder.unknown_events == 2


def test_any_chunking_gives_the_same_events() -> None:
    wire = recorded_wire("thinking_part_stream.yaml#0")
    whole = decode(wire)
    for size in (3, 64, 1000):
        assert decode(wire, chunk=size) == whole
    small = recorded_wire("incomplete_partial_json_response.txt")  # padded JSON, split byte by byte
    assert decode(small, chunk=1) == decode(small)


def test_sse_encoded_stream_decodes() -> None:
    wire = sse.encode("message_start", START) + sse.encode("message_stop", {"type": "message_stop"})
    assert isinstance(decode(wire)[-1], ir.Finish)
