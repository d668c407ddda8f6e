"""ChatStreamDecoder on hand-built chunks: one test per quirk and per failure mode."""

import json

from translation import ir
from translation.openai_chat import stream_decoder
from translation.sse import SSEEvent

from .helpers import check_ir_stream, chunk, decode_chunks, terminal

F = ir.FinishReason


def tool(index: int | None = None, id: str | None = None, name: str | None = None,
         arguments: str | None = None, **extra: object) -> dict[str, object]:
    call: dict[str, object] = dict(extra)
    if index is not None:
        call["index"] = index
    if id is not None:
        call["id"] = id
    function: dict[str, object] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    call["function"] = function
    return call


def test_text_stream_events_in_order() -> None:
    events = decode_chunks(chunk({"role": "assistant", "content": ""}), chunk({"content": "Hel"}),
                           chunk({"content": "lo"}), chunk({}, "stop"),
                           chunk(choices=[], usage={"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}))
    assert events == [
        ir.MessageStart(id="chatcmpl-t", model="m"),
        ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "Hel"), ir.BlockDelta(0, "text", "lo"),
        ir.Usage(input_tokens=5, output_tokens=2),
        ir.BlockStop(0), ir.Finish(F.STOP, raw="stop"),
    ]


def test_empty_and_null_content_produce_nothing() -> None:
    events = decode_chunks(chunk({"role": "assistant", "content": None}), chunk({"content": ""}), chunk({}, "stop"))
    assert events == [ir.MessageStart(id="chatcmpl-t", model="m"), ir.Finish(F.STOP, raw="stop")]


def test_reasoning_content_and_reasoning_fields_and_refusal() -> None:
    events = decode_chunks(chunk({"reasoning_content": "a"}), chunk({"reasoning": "b"}),
                           chunk({"refusal": "no"}), chunk({}, "stop"))
    check_ir_stream(events)
    deltas = [(e.kind, e.text) for e in events if isinstance(e, ir.BlockDelta)]
    assert deltas == [("reasoning", "a"), ("reasoning", "b"), ("refusal", "no")]
    assert [e.kind for e in events if isinstance(e, ir.BlockStart)] == ["reasoning", "refusal"]
    assert events[-1] == ir.Finish(F.REFUSAL, raw="stop")  # Chat says "stop"; the refusal says why


def test_reasoning_details_are_ignored() -> None:
    events = decode_chunks(chunk({"reasoning": "x", "reasoning_details": [{"type": "reasoning.text", "text": "x"}]}),
                           chunk({}, "stop"))
    assert [e.text for e in events if isinstance(e, ir.BlockDelta)] == ["x"]


def test_each_change_of_kind_closes_the_open_block() -> None:
    events = decode_chunks(chunk({"reasoning_content": "r", "content": "t"}),
                           chunk({"tool_calls": [tool(0, "c", "f", "{}")]}), chunk({"content": "again"}),
                           chunk({}, "tool_calls"))
    check_ir_stream(events)
    starts = [(e.index, e.kind) for e in events if isinstance(e, ir.BlockStart)]
    assert starts == [(0, "reasoning"), (1, "text"), (2, "tool_call"), (3, "text")]


def test_finish_reason_and_usage_on_the_same_chunk() -> None:
    events = decode_chunks(chunk({"content": "x"}, "length", usage={"prompt_tokens": 1, "completion_tokens": 1}))
    assert events[-2:] == [ir.BlockStop(0), ir.Finish(F.LENGTH, raw="length")]
    assert ir.Usage(input_tokens=1, output_tokens=1) in events


def test_repeated_finish_chunk_gives_one_finish() -> None:
    events = decode_chunks(chunk({"content": "x"}), chunk({}, "stop"), chunk({}, "stop"))
    check_ir_stream(events)
    assert terminal(events) == ir.Finish(F.STOP, raw="stop")


def test_usage_after_finish_is_delivered_before_the_terminal() -> None:
    events = decode_chunks(chunk({"content": "x"}), chunk({}, "stop"),
                           chunk(choices=[], usage={"prompt_tokens": 3, "completion_tokens": 4}))
    check_ir_stream(events)
    assert events.index(ir.Usage(input_tokens=3, output_tokens=4)) < events.index(terminal(events))


def test_first_chunk_with_empty_choices_and_empty_identity() -> None:
    events = decode_chunks({"choices": [], "id": "", "model": "", "object": "", "prompt_filter_results": []},
                           chunk({"content": "x"}), chunk({}, "stop"))
    assert events[0] == ir.MessageStart(id="chatcmpl-t", model="m")


def test_tool_call_follow_up_fragments_with_empty_id_do_not_overwrite_it() -> None:
    events = decode_chunks(
        chunk({"tool_calls": [tool(0, "call_real", "weather", "", type="function")]}),
        chunk({"tool_calls": [tool(0, "", None, '{"a":', type="function")]}),
        chunk({"tool_calls": [tool(0, "", None, "1}", type="function")]}),
        chunk({"tool_calls": [tool(0, "", None, "", type="function")]}),
        chunk({}, "tool_calls"))
    check_ir_stream(events)
    assert [e for e in events if isinstance(e, ir.BlockStart)] == [ir.BlockStart(0, "tool_call", id="call_real",
                                                                                 name="weather")]
    assert "".join(e.text for e in events if isinstance(e, ir.BlockDelta)) == '{"a":1}'


def test_whole_tool_call_in_one_delta() -> None:
    events = decode_chunks(chunk({"tool_calls": [tool(0, "tk", "weather", "{}")]}), chunk({}, "tool_calls"))
    assert events[1:4] == [ir.BlockStart(0, "tool_call", id="tk", name="weather"),
                           ir.BlockDelta(0, "arguments", "{}"), ir.BlockStop(0)]


def test_two_calls_in_one_delta_become_two_blocks() -> None:
    events = decode_chunks(chunk({"tool_calls": [tool(0, "a", "f", "{}"), tool(1, "b", "g", "{}")]}),
                           chunk({}, "tool_calls"))
    check_ir_stream(events)
    assert [(e.id, e.name) for e in events if isinstance(e, ir.BlockStart)] == [("a", "f"), ("b", "g")]


def test_tool_call_without_index_uses_its_position() -> None:
    events = decode_chunks(chunk({"tool_calls": [tool(None, "a", "f", "{}"), tool(None, "b", "g", "{}")]}),
                           chunk({}, "tool_calls"))
    assert [e.id for e in events if isinstance(e, ir.BlockStart)] == ["a", "b"]


def test_reused_index_with_a_new_id_is_a_new_call() -> None:
    events = decode_chunks(chunk({"tool_calls": [tool(0, "a", "f", "{}")]}),
                           chunk({"tool_calls": [tool(0, "b", "g", "{}")]}), chunk({}, "tool_calls"))
    check_ir_stream(events)
    assert [e.id for e in events if isinstance(e, ir.BlockStart)] == ["a", "b"]


def test_tool_call_without_id_gets_one() -> None:
    events = decode_chunks(chunk({"tool_calls": [tool(0, None, "f", "{}")]}), chunk({}, "tool_calls"))
    start = events[1]
    assert isinstance(start, ir.BlockStart) and start.id is not None and start.id.startswith("call_")


def test_arguments_for_a_closed_tool_call_are_malformed_not_dropped() -> None:
    events = decode_chunks(chunk({"tool_calls": [tool(0, "a", "f", '{"x":')]}),
                           chunk({"tool_calls": [tool(1, "b", "g", "{}")]}),
                           chunk({"tool_calls": [tool(0, None, None, "1}")]}), chunk({}, "tool_calls"))
    check_ir_stream(events)
    err = terminal(events)
    assert isinstance(err, ir.Error) and err.error_type == "malformed_upstream" and err.status == 502
    assert "index 0" in err.message


def test_empty_fragment_for_a_closed_tool_call_carries_nothing_and_is_ignored() -> None:
    events = decode_chunks(chunk({"tool_calls": [tool(0, "a", "f", "{}")]}),
                           chunk({"tool_calls": [tool(1, "b", "g", "{}")]}),
                           chunk({"tool_calls": [tool(0, "", None, "")]}), chunk({}, "tool_calls"))
    assert isinstance(terminal(events), ir.Finish)


def test_arguments_sent_as_an_object_are_serialised() -> None:
    events = decode_chunks(chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f",
                                                                                      "arguments": {"k": 1}}}]}),
                           chunk({}, "tool_calls"))
    assert ir.BlockDelta(0, "arguments", '{"k":1}') in events


def test_other_choices_are_ignored() -> None:
    events = decode_chunks(
        {"id": "x", "model": "m", "choices": [{"index": 0, "delta": {"content": "zero"}, "finish_reason": None},
                                              {"index": 1, "delta": {"content": "one"}, "finish_reason": None}]},
        {"id": "x", "model": "m", "choices": [{"index": 2, "delta": {"content": "two"}, "finish_reason": "stop"}]},
        {"id": "x", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    assert [e.text for e in events if isinstance(e, ir.BlockDelta)] == ["zero"]
    assert isinstance(terminal(events), ir.Finish)


def test_error_object_chunk_becomes_error_with_status_from_code() -> None:
    events = decode_chunks(chunk({"content": "partial"}),
                           {"id": "x", "error": {"code": 429, "message": "Rate limit exceeded"},
                            "choices": [{"index": 0, "delta": {}, "finish_reason": "error"}]})
    check_ir_stream(events)
    err = terminal(events)
    assert err == ir.Error(message="Rate limit exceeded", error_type="rate_limit_error", status=429, code="429")


def test_error_after_finish_reason_wins_over_the_held_finish() -> None:
    events = decode_chunks(chunk({"content": "x"}, "length"),
                           chunk(error={"code": 400, "message": "Token limit reached"}))
    check_ir_stream(events)
    err = terminal(events)
    assert isinstance(err, ir.Error) and err.status == 400


def test_sse_error_event_becomes_error_with_provider_type_and_code() -> None:
    decoder = stream_decoder()
    events = decoder.feed(SSEEvent(data='{"error":{"message":"tool call validation failed",'
                                        '"type":"invalid_request_error","code":"tool_use_failed",'
                                        '"status_code":400}}', event="error"))
    assert events == [ir.MessageStart(), ir.Error(message="tool call validation failed",
                                                  error_type="invalid_request_error", status=400,
                                                  code="tool_use_failed")]
    assert decoder.feed(SSEEvent(data="[DONE]")) == [] and decoder.finish() == []


def test_error_status_by_type_name_and_unknown_is_502() -> None:
    for err, status in [({"type": "rate_limit_exceeded", "message": "m"}, 429),
                        ({"type": "authentication_error", "message": "m"}, 401),
                        ({"code": "insufficient_quota", "message": "m"}, 429),
                        ({"type": "overloaded_error", "message": "m"}, 529),
                        ({"type": "server_error", "message": "m"}, 500),
                        ({"message": "mystery"}, 502)]:
        result = terminal(decode_chunks(chunk(error=err)))
        assert isinstance(result, ir.Error) and result.status == status, err


def test_non_json_error_event_keeps_its_text() -> None:
    decoder = stream_decoder()
    events = decoder.feed(SSEEvent(data="upstream exploded", event="error"))
    assert isinstance(events[-1], ir.Error) and events[-1].message == "upstream exploded"


def test_malformed_json_is_an_error_and_the_decoder_is_done() -> None:
    decoder = stream_decoder()
    first = decoder.feed(SSEEvent(data=chunk_json({"content": "a"})))
    bad = decoder.feed(SSEEvent(data="{not json"))
    assert isinstance(bad[-1], ir.Error) and bad[-1].error_type == "malformed_upstream" and bad[-1].status == 502
    assert ir.BlockStop(0) in bad
    assert decoder.feed(SSEEvent(data=chunk_json({"content": "b"}))) == [] and decoder.finish() == []
    check_ir_stream(first + bad)


def test_structurally_invalid_chunks_are_malformed() -> None:
    for bad in ['"a string"', "[1,2]", '{"choices":{}}', '{"choices":["x"]}', '{"choices":[{"delta":"x"}]}',
                '{"choices":[{"delta":{"content":5}}]}', '{"choices":[{"delta":{"tool_calls":{}}}]}',
                '{"choices":[{"delta":{"tool_calls":[{"index":"0"}]}}]}',
                '{"choices":[{"delta":{"tool_calls":["x"]}}]}',
                '{"choices":[{"delta":{"tool_calls":[{"index":0,"function":"f"}]}}]}']:
        events = decode_chunks(bad)
        check_ir_stream(events)
        err = terminal(events)
        assert isinstance(err, ir.Error) and err.error_type == "malformed_upstream", bad


def test_content_as_text_parts_is_accepted() -> None:
    events = decode_chunks(chunk({"content": [{"type": "text", "text": "a"}, {"type": "image"}]}), chunk({}, "stop"))
    assert ir.BlockDelta(0, "text", "a") in events


def test_end_without_finish_reason_is_truncation_after_closing_the_block() -> None:
    events = decode_chunks(chunk({"content": "half"}), done=False)
    assert events[-2:] == [ir.BlockStop(0), ir.transport_error(ir.TransportFailure.TRUNCATED, "upstream stream ended before completion")]


def test_done_without_finish_reason_is_also_truncation() -> None:
    err = terminal(decode_chunks(chunk({"content": "half"})))
    assert isinstance(err, ir.Error) and err.error_type == "upstream_truncated"


def test_empty_stream_still_starts_then_reports_truncation() -> None:
    events = stream_decoder().finish()
    assert events == [ir.MessageStart(), ir.transport_error(ir.TransportFailure.TRUNCATED, "upstream stream ended before completion")]


def test_finish_without_done_is_a_normal_end() -> None:
    events = decode_chunks(chunk({"content": "x"}), chunk({}, "stop"), done=False)
    assert terminal(events) == ir.Finish(F.STOP, raw="stop")


def test_unknown_event_types_and_empty_data_are_counted_and_ignored() -> None:
    decoder = stream_decoder()
    assert decoder.feed(SSEEvent(data='{"x":1}', event="ping")) == []
    assert decoder.feed(SSEEvent(data="  ")) == []
    assert decoder.feed(SSEEvent(data='{"object":"keepalive"}')) == []
    assert decoder.unknown_events == 3
    assert decoder.feed(SSEEvent(data=chunk_json({"content": "x"})))[1:] == [ir.BlockStart(0, "text"),
                                                                             ir.BlockDelta(0, "text", "x")]


def test_unknown_finish_reason_keeps_raw() -> None:
    assert terminal(decode_chunks(chunk({"content": "x"}, "eos"))) == ir.Finish(F.STOP, raw="eos")


def chunk_json(delta: dict[str, object]) -> str:
    return json.dumps(chunk(delta))


def annotation(start: int, end: int, link: str = "https://e.x/") -> dict:
    return {"type": "url_citation", "url_citation": {"url": link, "title": "E", "start_index": start,
                                                     "end_index": end}}


def test_annotations_become_citations_indexed_from_their_text_block() -> None:
    # As search models send them: all at once in a last content-less delta, indexed into the whole content.
    events = decode_chunks(chunk({"content": "Intro. "}), chunk({"reasoning_content": "hmm"}),
                           chunk({"content": "Cited fact."}),
                           chunk({"annotations": [annotation(7, 18)]}), chunk({}, "stop"))
    check_ir_stream(events)
    [cite] = [e for e in events if isinstance(e, ir.BlockDelta) and e.kind == "citation"]
    assert cite.index == 2 and cite.data is not None  # the second text block, after the reasoning
    assert (cite.data["type"], cite.data["url"], cite.data["title"]) == ("url_citation", "https://e.x/", "E")
    assert (cite.data["start_index"], cite.data["end_index"]) == (0, 11)


def test_logprobs_come_before_the_text_they_describe() -> None:
    tokens = [{"token": "Hi", "logprob": -0.5, "bytes": [72, 105], "top_logprobs": [
        {"token": "Hi", "logprob": -0.5, "bytes": [72, 105]}]}]
    with_logprobs = chunk({"content": "Hi"})
    with_logprobs["choices"][0]["logprobs"] = {"content": tokens, "refusal": None}
    events = decode_chunks(with_logprobs, chunk({}, "stop"))
    deltas = [(e.kind, e.text, e.data) for e in events if isinstance(e, ir.BlockDelta)]
    assert deltas == [("logprobs", "", {"content": tokens}), ("text", "Hi", None)]
