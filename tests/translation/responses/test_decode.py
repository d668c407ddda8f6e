import json

import pytest

from tests.fixtures.recorded_loader import recordings
from tests.translation.responses.helpers import check_ir_stream, decode
from translation import ir, responses
from translation.fold import fold
from translation.sse import SSEEvent

RESP = {"id": "resp_1", "object": "response", "model": "gpt-5", "status": "in_progress", "output": []}
USAGE = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 6,
         "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 16}


def sse(payload) -> SSEEvent:
    if isinstance(payload, str):
        return SSEEvent(data=payload)
    return SSEEvent(data=json.dumps(payload), event=payload.get("type"))


def run(*payloads, finish=True):
    decoder = responses.stream_decoder()
    out = [e for p in payloads for e in decoder.feed(sse(p))]
    if finish:
        out.extend(decoder.finish())
    return out, decoder


def created():
    return {"type": "response.created", "response": RESP}


def completed(output=(), usage=USAGE):
    return {"type": "response.completed", "response": {**RESP, "status": "completed", "output": list(output),
                                                       "usage": usage}}


def added(index, item):
    return {"type": "response.output_item.added", "output_index": index, "item": item}


def done(index, item):
    return {"type": "response.output_item.done", "output_index": index, "item": item}


def text_delta(index, delta, content_index=0, item_id="msg"):
    return {"type": "response.output_text.delta", "output_index": index, "content_index": content_index,
            "item_id": item_id, "delta": delta}


MSG = {"type": "message", "id": "msg", "role": "assistant", "status": "in_progress", "content": []}
CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": ""}


def test_created_starts_the_message_and_completed_ends_it():
    events, decoder = run(created(), {"type": "response.in_progress", "response": RESP},
                          {"type": "response.queued", "response": RESP}, completed())
    assert events == [ir.MessageStart(id="resp_1", model="gpt-5"),
                      ir.Usage(input_tokens=10, output_tokens=6, cached_tokens=4, reasoning_tokens=2),
                      ir.Finish(ir.FinishReason.STOP, raw="completed")]
    assert decoder.unknown_events == 0


def test_each_content_part_is_one_text_block():
    events, _ = run(created(), added(0, MSG),
                    {"type": "response.content_part.added", "output_index": 0, "content_index": 0,
                     "item_id": "msg", "part": {"type": "output_text", "text": "", "annotations": []}},
                    text_delta(0, "Hel"), text_delta(0, "lo"),
                    {"type": "response.output_text.annotation.added", "output_index": 0, "content_index": 0,
                     "annotation": {"type": "url_citation"}},
                    {"type": "response.content_part.done", "output_index": 0, "content_index": 0,
                     "item_id": "msg", "part": {"type": "output_text", "text": "Hello", "annotations": []}},
                    text_delta(0, "Second", content_index=1),
                    done(0, {**MSG, "content": [{"type": "output_text", "text": "Hello"},
                                                {"type": "output_text", "text": "Second part"}]}),
                    completed())
    assert events[1:8] == [
        ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "Hel"), ir.BlockDelta(0, "text", "lo"),
        ir.BlockStop(0), ir.BlockStart(1, "text"), ir.BlockDelta(1, "text", "Second"),
        ir.BlockDelta(1, "text", " part")]
    assert events[8] == ir.BlockStop(1)


def test_correlates_by_output_index_when_item_ids_rotate():
    events, _ = run(created(), added(0, {**MSG, "id": "a"}), text_delta(0, "x", item_id="b"),
                    text_delta(0, "y", item_id="c"), done(0, {**MSG, "id": "d", "content": [
                        {"type": "output_text", "text": "xy"}]}), completed())
    assert fold(events).blocks[0].text == "xy"


def test_reasoning_summary_parts_are_joined_and_signature_closes_the_block():
    rs = {"type": "reasoning", "id": "rs_1", "summary": []}

    def summary(i, delta):
        return {"type": "response.reasoning_summary_text.delta", "output_index": 0, "item_id": "rs_1",
                "summary_index": i, "delta": delta}

    events, decoder = run(created(), added(0, rs),
                          {"type": "response.reasoning_summary_part.added", "output_index": 0, "summary_index": 0},
                          summary(0, "First."), summary(1, "Second."),
                          done(0, {**rs, "encrypted_content": "gAAAA-enc", "summary": [
                              {"type": "summary_text", "text": "First."},
                              {"type": "summary_text", "text": "Second."}]}), completed())
    assert events[1:7] == [
        ir.BlockStart(0, "reasoning", id="rs_1"), ir.BlockDelta(0, "reasoning", "First."),
        ir.BlockDelta(0, "reasoning", "\n\n"), ir.BlockDelta(0, "reasoning", "Second."),
        ir.BlockDelta(0, "signature", "gAAAA-enc"), ir.BlockStop(0)]
    assert decoder.unknown_events == 0


def test_raw_reasoning_text_deltas_are_reasoning():
    events, _ = run(created(), added(0, {"type": "reasoning", "id": "r", "summary": [], "content": []}),
                    {"type": "response.content_part.added", "output_index": 0, "content_index": 0,
                     "part": {"type": "reasoning_text", "text": ""}},
                    {"type": "response.reasoning_text.delta", "output_index": 0, "content_index": 0, "delta": "raw"},
                    completed())
    assert fold(events).blocks[0].text == "raw"


def test_function_call_block_and_missing_remainder_from_done():
    events, _ = run(created(), added(0, CALL),
                    {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{\"city\":"},
                    {"type": "response.function_call_arguments.done", "output_index": 0,
                     "arguments": "{\"city\":\"Paris\"}"},
                    done(0, {**CALL, "arguments": "{\"city\":\"Paris\"}", "status": "completed"}), completed())
    assert events[1:5] == [ir.BlockStart(0, "tool_call", id="call_1", name="get_weather"),
                           ir.BlockDelta(0, "arguments", "{\"city\":"),
                           ir.BlockDelta(0, "arguments", "\"Paris\"}"), ir.BlockStop(0)]
    assert events[-1] == ir.Finish(ir.FinishReason.TOOL_CALLS, raw="completed")


def test_builtin_item_is_one_server_tool_block_with_the_done_item():
    ws_done = {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}}
    events, decoder = run(created(), added(0, {"type": "web_search_call", "id": "ws_1", "status": "in_progress"}),
                          {"type": "response.web_search_call.searching", "output_index": 0, "item_id": "ws_1"},
                          done(0, ws_done), completed())
    assert events[1:3] == [ir.BlockStart(0, "server_tool", id="ws_1", name="web_search_call", raw=ws_done,
                                         raw_protocol="responses"), ir.BlockStop(0)]
    assert decoder.unknown_events == 0


@pytest.mark.parametrize("reason, expected", [("max_output_tokens", ir.FinishReason.LENGTH),
                                              ("content_filter", ir.FinishReason.CONTENT_FILTER)])
def test_incomplete_gives_usage_and_finish_with_raw_reason(reason, expected):
    events, _ = run(created(), {"type": "response.incomplete", "response": {
        **RESP, "status": "incomplete", "incomplete_details": {"reason": reason}, "usage": USAGE}})
    assert events[-2:] == [ir.Usage(input_tokens=10, output_tokens=6, cached_tokens=4, reasoning_tokens=2),
                           ir.Finish(expected, raw=reason)]


def test_error_event_then_failed_is_one_error():
    events, _ = run(created(), {"type": "error", "code": "rate_limit_exceeded", "message": "slow", "param": None},
                    {"type": "response.failed", "response": {**RESP, "status": "failed",
                                                             "error": {"code": "server_error", "message": "x"}}})
    assert events[1:] == [ir.Error(message="slow", error_type="rate_limit_exceeded", status=429,
                                   code="rate_limit_exceeded")]


def test_failed_alone_is_an_error_with_status_by_code():
    events, _ = run(created(), added(0, MSG), text_delta(0, "part"),
                    {"type": "response.failed", "response": {**RESP, "status": "failed", "usage": USAGE,
                                                             "error": {"code": "server_error", "message": "boom"}}})
    assert events[-3:] == [ir.BlockStop(0),
                           ir.Usage(input_tokens=10, output_tokens=6, cached_tokens=4, reasoning_tokens=2),
                           ir.Error(message="boom", error_type="server_error", status=500, code="server_error")]


def test_done_marker_after_the_stream_is_ignored():
    events, decoder = run(created(), completed(), "[DONE]")
    assert isinstance(events[-1], ir.Finish) and decoder.unknown_events == 0


def test_unknown_events_are_counted_and_ignored():
    events, decoder = run(created(), {"type": "response.brand_new", "x": 1},
                          {"type": "response.audio.delta", "delta": "AAA"}, completed())
    assert decoder.unknown_events == 2
    assert isinstance(events[-1], ir.Finish)


@pytest.mark.parametrize("bad", [
    "{not json", "[1, 2]",
    {"type": "response.output_item.added", "item": MSG},
    {"type": "response.output_item.added", "output_index": 0, "item": "message"},
    {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": 5},
    {"type": "response.function_call_arguments.delta", "output_index": 3, "delta": "{"},
    {"type": "response.completed", "response": None},
])
def test_malformed_event_is_a_502_and_ends_the_decoder(bad):
    decoder = responses.stream_decoder()
    events = decoder.feed(sse(bad))
    assert isinstance(events[0], ir.MessageStart)
    assert events[-1].type == "error" and events[-1].error_type == "malformed_upstream"
    assert events[-1].status == 502
    assert decoder.feed(sse(created())) == [] and decoder.finish() == []


def test_fragment_for_a_closed_block_is_malformed_not_dropped():
    events, _ = run(created(), added(0, MSG), text_delta(0, "a"), added(1, CALL), text_delta(0, "late"))
    assert events[-3:] == [ir.BlockStart(1, "tool_call", id="call_1", name="get_weather"), ir.BlockStop(1),
                           events[-1]]
    assert isinstance(events[-1], ir.Error) and events[-1].error_type == "malformed_upstream"


def test_done_events_for_a_closed_block_that_add_nothing_are_fine():
    """OpenRouter finishes its reasoning item after the message item."""
    rs = {"type": "reasoning", "id": "rs_tmp", "summary": []}
    events, _ = run(created(), added(0, rs),
                    {"type": "response.reasoning_text.delta", "output_index": 0, "content_index": 0, "delta": "hm"},
                    added(1, MSG), text_delta(1, "4"), done(1, {**MSG, "content": [{"type": "output_text", "text": "4"}]}),
                    {"type": "response.reasoning_text.done", "output_index": 0, "content_index": 0, "text": "hm"},
                    done(0, {**rs, "content": [{"type": "reasoning_text", "text": "hm"}]}), completed())
    check_ir_stream(events)
    assert [(b.kind, b.text) for b in fold(events).blocks] == [("reasoning", "hm"), ("text", "4")]


def test_truncated_stream_closes_the_block_and_errors():
    events, _ = run(created(), added(0, MSG), text_delta(0, "Once"))
    assert events[-2:] == [ir.BlockStop(0), ir.transport_error(ir.TransportFailure.TRUNCATED, "upstream stream ended before completion")]


def test_empty_stream_still_starts_with_message_start():
    events, _ = run()
    assert isinstance(events[0], ir.MessageStart) and isinstance(events[1], ir.Error)


def test_stream_that_starts_without_created_gets_a_message_start():
    events, _ = run(added(0, MSG), text_delta(0, "x"), completed())
    check_ir_stream(events)
    assert events[0] == ir.MessageStart()


def test_completed_alone_carries_the_whole_answer():
    output = [{"type": "message", "id": "m", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": "whole"}]}, {**CALL, "arguments": "{}"}]
    events, _ = run(created(), completed(output))
    check_ir_stream(events)
    resp = fold(events)
    assert [(b.kind, b.text) for b in resp.blocks] == [("text", "whole"), ("tool_call", "{}")]
    assert resp.finish.reason == ir.FinishReason.TOOL_CALLS


def test_empty_added_event_is_tolerated():
    events, _ = run(created(), {"type": "response.output_item.added", "output_index": 0, "item": None},
                    completed())
    assert isinstance(events[-1], ir.Finish)


def test_any_chunking_gives_the_same_events():
    rec = next(r for r in recordings(protocol="responses", stream=True)
               if r.name.endswith("openai-reasoning-encrypted-content.1.chunks.txt#0"))
    whole = decode(rec.body)
    for size in (1, 7, 64, 1000):
        assert decode(rec.body, chunk=size) == whole


URL = {"type": "url_citation", "url": "https://e.x/", "title": "E", "start_index": 3, "end_index": 8}
R = ir.FinishReason
TOKEN = {"token": "Hi", "logprob": -0.5, "bytes": [72, 105], "top_logprobs": []}


def test_refusal_part_is_a_refusal_block_and_the_response_a_refusal():
    events, _ = run(created(), added(0, MSG),
                    {"type": "response.content_part.added", "output_index": 0, "content_index": 0,
                     "part": {"type": "refusal", "refusal": ""}},
                    {"type": "response.refusal.delta", "output_index": 0, "content_index": 0, "delta": "I can't"},
                    {"type": "response.refusal.done", "output_index": 0, "content_index": 0, "refusal": "I can't."},
                    done(0, {**MSG, "content": [{"type": "refusal", "refusal": "I can't."}]}), completed())
    check_ir_stream(events)
    resp = fold(events)
    assert [(b.kind, b.text) for b in resp.blocks] == [("refusal", "I can't.")]
    assert resp.finish == ir.Finish(R.REFUSAL, raw="completed")


def test_annotation_added_is_a_citation_on_its_part_and_delta_logprobs_precede_their_text():
    events, decoder = run(created(), added(0, MSG),
                          {**text_delta(0, "Hi"), "logprobs": [TOKEN]}, text_delta(0, " there"),
                          {"type": "response.output_text.annotation.added", "output_index": 0, "content_index": 0,
                           "annotation_index": 0, "annotation": URL},
                          done(0, {**MSG, "content": [{"type": "output_text", "text": "Hi there",
                                                       "annotations": [URL]}]}), completed())
    check_ir_stream(events)
    assert decoder.unknown_events == 0
    deltas = [(e.kind, e.text) for e in events if isinstance(e, ir.BlockDelta)]
    assert deltas == [("logprobs", ""), ("text", "Hi"), ("text", " there"), ("citation", "")]
    [text] = fold(events).blocks
    assert text.logprobs == [TOKEN]
    [cite] = text.citations  # announced once: the finished part does not repeat it
    assert (cite["type"], cite["url"], text.text[cite["start_index"]:cite["end_index"]]) == (
        "url_citation", "https://e.x/", "there")


def test_annotations_only_in_the_finished_part_are_not_lost():
    events, _ = run(created(), added(0, MSG), text_delta(0, "Hi there"),
                    done(0, {**MSG, "content": [{"type": "output_text", "text": "Hi there", "annotations": [URL],
                                                 "logprobs": [TOKEN]}]}), completed())
    [text] = fold(events).blocks
    assert [c["url"] for c in text.citations] == ["https://e.x/"] and text.logprobs == [TOKEN]
