from openai.types.responses import Response

from tests.translation.responses.helpers import encode, validate_wire, wire_events
from translation import ir, responses
from translation.protocol import EncodeContext

CTX = EncodeContext(model="client-model", id="resp_test", created=1700000000)
R = ir.FinishReason


def types(events):
    return [e["type"] for e in events]


def text_stream(*extra, finish=ir.Finish(R.STOP)):
    return [ir.MessageStart(id="up", model="up-model"), ir.BlockStart(0, "text"),
            ir.BlockDelta(0, "text", "Hello"), ir.BlockDelta(0, "text", " there!"), ir.BlockStop(0),
            *extra, finish]


def test_text_response_follows_the_sop_sequence_exactly():
    events = validate_wire(encode(text_stream(ir.Usage(input_tokens=10, output_tokens=5)), CTX))
    assert types(events) == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done", "response.completed"]
    created = events[0]["response"]
    assert created["id"] == "resp_test" and created["model"] == "client-model" and created["usage"] is None
    Response.model_validate(created)
    item_id = events[2]["item"]["id"]
    assert item_id.startswith("msg_")
    assert events[2]["item"] == {"type": "message", "id": item_id, "status": "in_progress",
                                 "role": "assistant", "content": []}
    assert events[3] == {"type": "response.content_part.added", "sequence_number": 3, "item_id": item_id,
                         "output_index": 0, "content_index": 0,
                         "part": {"type": "output_text", "text": "", "annotations": []}}
    assert events[4] == {"type": "response.output_text.delta", "sequence_number": 4, "item_id": item_id,
                         "output_index": 0, "content_index": 0, "delta": "Hello", "logprobs": []}
    final = events[-1]["response"]
    assert final["status"] == "completed"
    assert final["usage"] == {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                              "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                              "total_tokens": 15}
    assert final["output"][0]["content"][0]["text"] == "Hello there!"


def test_reasoning_block_with_signature():
    events = validate_wire(encode([
        ir.MessageStart(), ir.BlockStart(0, "reasoning", id="rs_upstream"),
        ir.BlockDelta(0, "reasoning", "Think"), ir.BlockDelta(0, "reasoning", "ing."),
        ir.BlockDelta(0, "signature", "gAAAA"), ir.BlockDelta(0, "signature", "-sig"), ir.BlockStop(0),
        ir.Finish(R.STOP)], CTX))
    assert types(events)[2:-1] == [
        "response.output_item.added", "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta", "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done"]
    assert events[2]["item"] == {"type": "reasoning", "id": "rs_upstream", "summary": [], "encrypted_content": None}
    assert events[-2]["item"] == {"type": "reasoning", "id": "rs_upstream", "encrypted_content": "gAAAA-sig",
                                  "summary": [{"type": "summary_text", "text": "Thinking."}]}


def test_reasoning_without_text_has_no_summary_part_and_a_fresh_id():
    events = validate_wire(encode([
        ir.MessageStart(), ir.BlockStart(0, "reasoning"), ir.BlockDelta(0, "redacted", "opaque"),
        ir.BlockStop(0), ir.Finish(R.STOP)], CTX))
    assert types(events)[2:-1] == ["response.output_item.added", "response.output_item.done"]
    item = events[-2]["item"]
    assert item["id"].startswith("rs_") and item["summary"] == [] and item["encrypted_content"] is None


def test_tool_call_block():
    events = validate_wire(encode([
        ir.MessageStart(), ir.BlockStart(0, "tool_call", id="toolu_01", name="get_weather"),
        ir.BlockDelta(0, "arguments", "{\"city\":"), ir.BlockDelta(0, "arguments", "\"Paris\"}"),
        ir.BlockStop(0), ir.Finish(R.TOOL_CALLS, raw="tool_use")], CTX))
    added, done = events[2]["item"], events[-2]["item"]
    assert added["id"].startswith("fc_")
    assert added == {"type": "function_call", "id": added["id"], "call_id": "toolu_01", "name": "get_weather",
                     "arguments": "", "status": "in_progress"}
    assert events[3] == {"type": "response.function_call_arguments.delta", "sequence_number": 3,
                         "item_id": added["id"], "output_index": 0, "delta": "{\"city\":"}
    assert events[5]["arguments"] == "{\"city\":\"Paris\"}"
    assert done == {**added, "arguments": "{\"city\":\"Paris\"}", "status": "completed"}
    assert events[-1]["type"] == "response.completed"


def test_server_tool_blocks_only_for_responses_clients():
    raw = {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}}
    events = validate_wire(encode([
        ir.MessageStart(),
        ir.BlockStart(0, "server_tool", raw={"type": "server_tool_use", "id": "x"}, raw_protocol="anthropic"),
        ir.BlockDelta(0, "text", "{\"query\":1}"), ir.BlockStop(0),
        ir.BlockStart(1, "server_tool", raw=raw, raw_protocol="responses"), ir.BlockStop(1),
        ir.BlockStart(2, "text"), ir.BlockDelta(2, "text", "ok"), ir.BlockStop(2), ir.Finish(R.STOP)], CTX))
    assert [(e["type"], e["output_index"]) for e in events if "output_item" in e["type"]] == [
        ("response.output_item.added", 0), ("response.output_item.done", 0),
        ("response.output_item.added", 1), ("response.output_item.done", 1)]
    assert events[2]["item"] == raw and events[3]["item"] == raw


def test_usage_after_finish_is_merged_into_completed():
    events = wire_events(encode([
        ir.MessageStart(usage=ir.Usage(input_tokens=20, cached_tokens=8)), ir.Finish(R.STOP),
        ir.Usage(output_tokens=7, reasoning_tokens=3)], CTX))
    usage = events[-1]["response"]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (20, 7, 27)
    assert usage["input_tokens_details"]["cached_tokens"] == 8
    assert usage["output_tokens_details"]["reasoning_tokens"] == 3


def test_length_and_content_filter_end_with_response_incomplete():
    for finish, reason in ((ir.Finish(R.LENGTH, raw="max_tokens"), "max_output_tokens"),
                           (ir.Finish(R.CONTENT_FILTER), "content_filter")):
        events = validate_wire(encode(text_stream(finish=finish), CTX))
        assert events[-1]["type"] == "response.incomplete"
        assert events[-1]["response"]["incomplete_details"] == {"reason": reason}
        Response.model_validate(events[-1]["response"])


def test_error_ends_the_stream_at_once_with_response_failed():
    encoder = responses.stream_encoder(CTX)
    chunks = [b for e in [ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "par")]
              for b in encoder.feed(e)]
    chunks += encoder.feed(ir.Error(message="Overloaded", error_type="overloaded_error", status=529))
    assert encoder.feed(ir.BlockDelta(0, "text", "more")) == [] and encoder.finish() == []
    events = validate_wire(b"".join(chunks))
    assert types(events)[-4:] == ["response.output_text.done", "response.content_part.done",
                                  "response.output_item.done", "response.failed"]
    assert events[-2]["item"]["status"] == "incomplete"
    failed = events[-1]["response"]
    assert failed["status"] == "failed" and failed["error"] == {"code": "server_error", "message": "Overloaded"}
    assert failed["output"][0]["content"][0]["text"] == "par"


def test_finish_without_a_finish_reason_fails_the_response():
    events = validate_wire(encode([ir.MessageStart(), ir.BlockStart(0, "tool_call", id="c", name="f"),
                                   ir.BlockDelta(0, "arguments", "{")], CTX))
    assert events[-1]["response"]["error"]["message"] == "upstream ended without a finish reason"
    assert events[-2]["item"]["status"] == "incomplete"


def test_finish_with_nothing_fed_still_writes_a_whole_stream():
    events = validate_wire(encode([], CTX))
    assert types(events) == ["response.created", "response.in_progress", "response.failed"]


def test_error_finish_reason_fails_the_response():
    events = validate_wire(encode([ir.MessageStart(), ir.Finish(R.ERROR)], CTX))
    assert events[-1]["type"] == "response.failed"


def test_events_before_message_start_still_open_the_response():
    events = validate_wire(encode([ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "x"), ir.BlockStop(0),
                                   ir.Finish(R.STOP)], CTX))
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "x"


def test_response_object_echoes_the_client_request():
    client = {"model": "alias", "input": "x", "instructions": "Be terse.", "tools": [{"type": "web_search"}],
              "temperature": 0.2, "top_p": 0.3, "tool_choice": "none", "parallel_tool_calls": False,
              "max_output_tokens": 64, "metadata": {"k": "v"}, "reasoning": {"effort": "low", "summary": "auto"},
              "store": False, "user": "u", "previous_response_id": "resp_prev", "truncation": "auto"}
    ctx = EncodeContext(model="alias", body=client, id="resp_echo")
    events = validate_wire(encode(text_stream(), ctx))
    for event in (events[0], events[1], events[-1]):
        response = event["response"]
        Response.model_validate(response)
        for key in ("instructions", "tools", "temperature", "top_p", "tool_choice", "parallel_tool_calls",
                    "max_output_tokens", "metadata", "reasoning", "store", "user", "previous_response_id",
                    "truncation"):
            assert response[key] == client[key], key


def test_defaults_follow_the_sop_without_a_request():
    response = wire_events(encode([], EncodeContext(model="m")))[0]["response"]
    assert response["id"].startswith("resp_")
    assert {k: response[k] for k in ("metadata", "parallel_tool_calls", "temperature", "tool_choice", "tools",
                                     "top_p", "reasoning", "store", "truncation", "instructions", "user")} == {
        "metadata": {}, "parallel_tool_calls": True, "temperature": 1.0, "tool_choice": "auto", "tools": [],
        "top_p": 1.0, "reasoning": {"effort": None, "summary": None}, "store": True, "truncation": "disabled",
        "instructions": None, "user": None}


URL = {"type": "url_citation", "url": "https://e.x/", "title": "E", "cited_text": None, "start_index": 6,
       "end_index": 11, "raw": {}}
TOKEN = {"token": "Hello", "logprob": -0.5, "bytes": None, "top_logprobs": []}


def test_refusal_block_is_a_refusal_part_and_the_response_completes():
    wire = encode([ir.MessageStart(), ir.BlockStart(0, "refusal"), ir.BlockDelta(0, "refusal", "I can't"),
                   ir.BlockDelta(0, "refusal", " help."), ir.BlockStop(0), ir.Finish(R.REFUSAL, raw="stop")], CTX)
    events = validate_wire(wire)
    assert types(events)[2:] == [
        "response.output_item.added", "response.content_part.added", "response.refusal.delta",
        "response.refusal.delta", "response.refusal.done", "response.content_part.done",
        "response.output_item.done", "response.completed"]
    assert events[3]["part"] == {"type": "refusal", "refusal": ""}
    final = Response.model_validate(events[-1]["response"])
    assert final.status == "completed" and final.output[0].content[0].refusal == "I can't help."


def test_refusal_without_a_message_is_incomplete_for_content_filter():
    events = validate_wire(encode(text_stream(finish=ir.Finish(R.REFUSAL, raw="refusal")), CTX))
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["incomplete_details"] == {"reason": "content_filter"}


def test_citations_are_announced_and_kept_in_the_part_logprobs_ride_on_their_delta():
    events = validate_wire(encode([
        ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "logprobs", "", data={"content": [TOKEN]}),
        ir.BlockDelta(0, "text", "Hello"), ir.BlockDelta(0, "text", " there!"),
        ir.BlockDelta(0, "citation", "", data=URL),
        ir.BlockDelta(0, "citation", "", data={**URL, "type": "page_location"}),  # no Responses shape
        ir.BlockStop(0), ir.Finish(R.STOP)], CTX))
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert [d["logprobs"] for d in deltas] == [[{"token": "Hello", "logprob": -0.5, "bytes": [72, 101, 108, 108, 111],
                                                 "top_logprobs": []}], []]
    [added] = [e for e in events if e["type"] == "response.output_text.annotation.added"]
    note = {"type": "url_citation", "url": "https://e.x/", "title": "E", "start_index": 6, "end_index": 11}
    assert (added["annotation_index"], added["annotation"]) == (0, note)
    final = Response.model_validate(events[-1]["response"])
    part = final.output[0].content[0]
    assert part.text[part.annotations[0].start_index:part.annotations[0].end_index] == "there"
    assert [t.token for t in part.logprobs or []] == ["Hello"]


def test_failed_response_carries_the_upstream_code():
    events = validate_wire(encode([ir.MessageStart(), ir.Error(
        message="too long", error_type="invalid_request_error", status=400, code="context_length_exceeded")], CTX))
    assert events[-1]["response"]["error"] == {"code": "context_length_exceeded", "message": "too long"}
