from typing import Any

from translation import anthropic, ir, sse
from translation.protocol import EncodeContext

from .helpers import check_anthropic_wire, encode, wire_events

CTX = EncodeContext(model="claude-client", id="msg_test")
STOP = ir.Finish(ir.FinishReason.STOP, raw="stop")


def payloads(events: list[ir.Event]) -> list[dict[str, Any]]:
    wire = encode(events, CTX)
    check_anthropic_wire(wire)
    return [p for _, p in wire_events(wire)]


def body_events(events: list[ir.Event]) -> list[dict[str, Any]]:
    """The events between ping and message_delta/error."""

    out = payloads(events)[2:]
    return [p for p in out if p["type"] not in ("message_delta", "message_stop", "error")]


def test_message_start_then_ping_with_full_usage_shape() -> None:
    out = payloads([ir.MessageStart(id="upstream", model="upstream-model",
                                    usage=ir.Usage(input_tokens=1000, cached_tokens=700, cache_creation_tokens=200)),
                    STOP])
    assert out[0] == {"type": "message_start", "message": {
        "id": "msg_test", "type": "message", "role": "assistant", "content": [], "model": "claude-client",
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 0, "cache_creation_input_tokens": 200,
                  "cache_read_input_tokens": 700}}}
    assert out[1] == {"type": "ping"}


def test_message_start_usage_is_zero_when_unknown_and_id_is_generated() -> None:
    out = [p for _, p in wire_events(encode([ir.MessageStart(), STOP], EncodeContext(model="m")))]
    assert out[0]["message"]["usage"] == {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0,
                                          "cache_read_input_tokens": 0}
    assert out[0]["message"]["id"].startswith("msg_")


def test_every_element_is_one_complete_sse_event_with_its_event_line() -> None:
    encoder = anthropic.stream_encoder(CTX)
    chunks = encoder.feed(ir.MessageStart()) + encoder.feed(ir.BlockStart(0, "text")) + \
        encoder.feed(ir.BlockDelta(0, "text", "hi\nthere")) + encoder.feed(ir.BlockStop(0)) + \
        encoder.feed(STOP) + encoder.finish()
    for chunk in chunks:
        parser = sse.SSEParser()
        [event] = parser.feed(chunk)
        assert chunk.startswith(b"event: ") and event.event == sse.loads(event.data)["type"]
        assert parser.finish() == []


def test_text_block() -> None:
    assert body_events([ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "Hel"),
                        ir.BlockDelta(0, "text", ""), ir.BlockDelta(0, "text", "lo"), ir.BlockStop(0), STOP]) == [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}},
        {"type": "content_block_stop", "index": 0},
    ]


def test_thinking_block_always_ends_with_its_signature() -> None:
    assert body_events([ir.MessageStart(), ir.BlockStart(0, "reasoning"), ir.BlockDelta(0, "reasoning", "a"),
                        ir.BlockDelta(0, "signature", "sig-1"), ir.BlockDelta(0, "signature", "sig-2"),
                        ir.BlockDelta(0, "reasoning", "b"), ir.BlockStop(0), STOP]) == [
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "a"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "b"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig-1sig-2"}},
        {"type": "content_block_stop", "index": 0},
    ]


def test_unsigned_thinking_gets_an_empty_signature_delta() -> None:
    out = body_events([ir.MessageStart(), ir.BlockStart(0, "reasoning"), ir.BlockDelta(0, "reasoning", "a"),
                       ir.BlockStop(0), STOP])
    assert out[-2] == {"type": "content_block_delta", "index": 0,
                       "delta": {"type": "signature_delta", "signature": ""}}


def test_redacted_reasoning_starts_as_redacted_thinking_with_all_its_data() -> None:
    assert body_events([ir.MessageStart(), ir.BlockStart(0, "reasoning"), ir.BlockDelta(0, "redacted", "opa"),
                        ir.BlockDelta(0, "redacted", "que"), ir.BlockDelta(0, "reasoning", "ignored"),
                        ir.BlockStop(0), STOP]) == [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking", "data": "opaque"}},
        {"type": "content_block_stop", "index": 0},
    ]


def test_empty_reasoning_block_is_not_shown_and_indexes_stay_contiguous() -> None:
    out = body_events([ir.MessageStart(), ir.BlockStart(0, "reasoning"), ir.BlockStop(0),
                       ir.BlockStart(1, "text"), ir.BlockDelta(1, "text", "x"), ir.BlockStop(1), STOP])
    assert out[0] == {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}


def test_tool_use_block() -> None:
    out = body_events([ir.MessageStart(), ir.BlockStart(0, "tool_call", id="toolu_1", name="get_weather"),
                       ir.BlockDelta(0, "arguments", '{"city":'), ir.BlockDelta(0, "arguments", ' "Paris"}'),
                       ir.BlockStop(0), ir.BlockStart(1, "tool_call", name="other"), ir.BlockStop(1), STOP])
    assert out[:4] == [
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"city":'}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": ' "Paris"}'}},
        {"type": "content_block_stop", "index": 0},
    ]
    assert out[4]["content_block"]["id"].startswith("toolu_")


def test_server_blocks_only_for_anthropic_clients() -> None:
    raw = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}}
    out = body_events([ir.MessageStart(),
                       ir.BlockStart(0, "server_tool", raw={"type": "web_search_call", "id": "ws"},
                                     raw_protocol="responses"),
                       ir.BlockDelta(0, "text", "dropped"), ir.BlockStop(0),
                       ir.BlockStart(1, "server_tool", raw=raw, raw_protocol="anthropic"), ir.BlockStop(1),
                       ir.BlockStart(2, "text"), ir.BlockStop(2), STOP])
    assert out == [
        {"type": "content_block_start", "index": 0, "content_block": raw},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_stop", "index": 1},
    ]


def test_block_start_while_another_is_open_closes_it_first() -> None:
    out = body_events([ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockStart(1, "text"),
                       ir.BlockDelta(0, "text", "late, dropped"), STOP])
    assert [p["type"] for p in out] == ["content_block_start", "content_block_stop", "content_block_start",
                                        "content_block_stop"]


def test_finish_writes_message_delta_with_merged_usage_then_message_stop() -> None:
    out = payloads([ir.MessageStart(usage=ir.Usage(input_tokens=500, cached_tokens=100)),
                    ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "x"), ir.BlockStop(0),
                    ir.Finish(ir.FinishReason.TOOL_CALLS, raw="tool_calls"),
                    ir.Usage(output_tokens=42, reasoning_tokens=7)])
    assert out[-2:] == [
        {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
         "usage": {"input_tokens": 400, "output_tokens": 42, "cache_creation_input_tokens": 0,
                   "cache_read_input_tokens": 100, "output_tokens_details": {"thinking_tokens": 7}}},
        {"type": "message_stop"},
    ]


def test_own_stop_reason_and_stop_sequence_survive() -> None:
    out = payloads([ir.MessageStart(), ir.Finish(ir.FinishReason.STOP, raw="stop_sequence", stop_sequence="###")])
    assert out[-2]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "###"}
    out = payloads([ir.MessageStart(), ir.Finish(ir.FinishReason.LENGTH, raw="model_context_window_exceeded")])
    assert out[-2]["delta"]["stop_reason"] == "model_context_window_exceeded"


def test_finish_closes_an_open_block() -> None:
    out = payloads([ir.MessageStart(), ir.BlockStart(0, "reasoning"), ir.BlockDelta(0, "reasoning", "x"), STOP])
    assert [p["type"] for p in out[2:]] == ["content_block_start", "content_block_delta", "content_block_delta",
                                            "content_block_stop", "message_delta", "message_stop"]


def test_error_closes_the_block_then_error_event_then_message_stop_and_nothing_after() -> None:
    encoder = anthropic.stream_encoder(CTX)
    out: list[bytes] = []
    fed: list[ir.Event] = [ir.MessageStart(), ir.BlockStart(0, "tool_call", id="t", name="f"),
                           ir.BlockDelta(0, "arguments", "{"),
                           ir.Error(message="Overloaded", error_type="overloaded_error", status=529)]
    for e in fed:
        out += encoder.feed(e)
    assert encoder.feed(ir.BlockDelta(0, "arguments", "}")) == [] and encoder.feed(STOP) == []
    assert encoder.finish() == []
    wire = b"".join(out)
    events = check_anthropic_wire(wire)
    assert [p["type"] for _, p in events[-3:]] == ["content_block_stop", "error", "message_stop"]
    assert events[-2][1] == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def test_error_type_follows_the_status_for_foreign_types() -> None:
    out = payloads([ir.MessageStart(), ir.Error(message="quota", error_type="insufficient_quota", status=429)])
    assert out[-2]["error"] == {"type": "rate_limit_error", "message": "quota"}
    out = payloads([ir.MessageStart(), ir.Error(message="bad chunk", error_type="malformed_upstream", status=502)])
    assert out[-2]["error"]["type"] == "api_error"


def test_finish_without_finish_reason_is_an_error_ending() -> None:
    out = payloads([ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "cut")])
    assert out[-2] == {"type": "error", "error": {"type": "api_error",
                                                  "message": "upstream ended without a finish reason"}}


def test_nothing_at_all_still_makes_a_well_formed_stream() -> None:
    wire = encode([], CTX)
    assert [p["type"] for _, p in check_anthropic_wire(wire)] == ["message_start", "ping", "error", "message_stop"]


def test_blocks_before_message_start_start_the_message() -> None:
    wire = encode([ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "x"), ir.BlockStop(0), STOP], CTX)
    check_anthropic_wire(wire)


def test_finish_is_idempotent() -> None:
    encoder = anthropic.stream_encoder(CTX)
    encoder.feed(ir.MessageStart())
    encoder.feed(STOP)
    assert encoder.finish() and encoder.finish() == [] and encoder.feed(ir.MessageStart()) == []


def test_arguments_are_streamed_once_they_show_a_json_object() -> None:
    out = body_events([ir.MessageStart(), ir.BlockStart(0, "tool_call", id="t", name="f"),
                       ir.BlockDelta(0, "arguments", " "), ir.BlockDelta(0, "arguments", ' {"a"'),
                       ir.BlockDelta(0, "arguments", ": 1}"), ir.BlockStop(0), STOP])
    assert [p["delta"]["partial_json"] for p in out if p["type"] == "content_block_delta"] == ['{"a"', ": 1}"]


def test_arguments_that_are_not_an_object_are_dropped_so_the_client_does_not_crash() -> None:
    # The SDKs parse every prefix of input_json_delta and raise on anything but an object.
    for args in ["null", "[1, 2]", "00", "not json"]:
        out = body_events([ir.MessageStart(), ir.BlockStart(0, "tool_call", id="t", name="f"),
                           ir.BlockDelta(0, "arguments", args), ir.BlockStop(0), STOP])
        assert [p["type"] for p in out] == ["content_block_start", "content_block_stop"]


def url(start: int, end: int) -> dict[str, Any]:
    return {"type": "url_citation", "url": "https://e.x/", "title": "E", "cited_text": None, "start_index": start,
            "end_index": end, "raw": {"type": "url_citation"}}


def test_an_openai_url_citation_becomes_a_web_search_result_location_quoting_its_span() -> None:
    out = payloads([ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "Rain in "),
                    ir.BlockDelta(0, "text", "Paris today."), ir.BlockDelta(0, "citation", "", data=url(8, 13)),
                    ir.BlockDelta(0, "citation", "", data={**url(0, 1), "type": "file_citation"}),
                    ir.BlockStop(0), STOP])
    cited = [p["delta"]["citation"] for p in out if p["type"] == "content_block_delta"
             and p["delta"]["type"] == "citations_delta"]
    assert cited == [{"type": "web_search_result_location", "cited_text": "Paris", "url": "https://e.x/",
                      "title": "E", "encrypted_index": ""}]  # the file citation has no Anthropic shape


def test_an_anthropic_citation_goes_back_as_it_came() -> None:
    raw = {"type": "char_location", "cited_text": "x", "document_index": 0, "document_title": None,
           "start_char_index": 0, "end_char_index": 1}
    out = payloads([ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "x"),
                    ir.BlockDelta(0, "citation", "", data={"type": "char_location", "url": None, "start_index": 0,
                                                           "end_index": 1, "raw": raw}), ir.BlockStop(0), STOP])
    assert [p["delta"] for p in out if p["type"] == "content_block_delta"][1] == {
        "type": "citations_delta", "citation": raw}


def test_a_refusal_message_is_the_stop_details_explanation() -> None:
    out = payloads([ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "Hm."), ir.BlockStop(0),
                    ir.BlockStart(1, "refusal"), ir.BlockDelta(1, "refusal", "I can't help with that."),
                    ir.BlockStop(1), ir.Finish(ir.FinishReason.REFUSAL, raw="stop")])
    assert [p["content_block"]["type"] for p in out if p["type"] == "content_block_start"] == ["text"]
    [delta] = [p["delta"] for p in out if p["type"] == "message_delta"]
    assert delta["stop_reason"] == "refusal"
    assert delta["stop_details"] == {"type": "refusal", "category": None, "explanation": "I can't help with that."}


def test_anthropic_stop_details_go_back_verbatim() -> None:
    details = {"type": "refusal", "category": "cyber", "explanation": "Blocked."}
    out = payloads([ir.MessageStart(), ir.BlockStart(0, "refusal", raw=details, raw_protocol="anthropic"),
                    ir.BlockDelta(0, "refusal", "Blocked."), ir.BlockStop(0),
                    ir.Finish(ir.FinishReason.REFUSAL, raw="refusal")])
    [delta] = [p["delta"] for p in out if p["type"] == "message_delta"]
    assert delta["stop_details"] == details


def test_logprobs_have_no_anthropic_slot() -> None:
    out = payloads([ir.MessageStart(), ir.BlockStart(0, "text"),
                    ir.BlockDelta(0, "logprobs", "", data={"content": [{"token": "x", "logprob": 0.0}]}),
                    ir.BlockDelta(0, "text", "x"), ir.BlockStop(0), STOP])
    assert [p["delta"] for p in out if p["type"] == "content_block_delta"] == [{"type": "text_delta", "text": "x"}]
