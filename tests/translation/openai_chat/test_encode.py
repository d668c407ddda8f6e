"""ChatStreamEncoder: the exact chunks a Chat client receives."""

from typing import Any

from translation import ir
from translation.openai_chat import stream_encoder
from translation.protocol import EncodeContext
from translation.sse import DONE

from .helpers import encode, wire_payloads

F = ir.FinishReason
CTX = EncodeContext(model="client-model", id="chatcmpl-fixed", created=1700000000)


def chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> dict[str, Any]:
    out = {"id": "chatcmpl-fixed", "object": "chat.completion.chunk", "created": 1700000000,
           "model": "client-model",
           "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}
    out.update(extra)
    return out


ROLE = chunk({"role": "assistant", "content": ""})


def test_text_stream_wire_shape() -> None:
    wire = encode([
        ir.MessageStart(id="upstream-id", model="upstream-model"),
        ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "Hi"), ir.BlockDelta(0, "text", " there"),
        ir.BlockStop(0), ir.Finish(F.STOP), ir.Usage(input_tokens=8, output_tokens=3),
    ], CTX)
    assert wire_payloads(wire) == [
        ROLE, chunk({"content": "Hi"}), chunk({"content": " there"}),
        chunk({}, "stop", usage={"prompt_tokens": 8, "completion_tokens": 3, "total_tokens": 11}),
        "[DONE]",
    ]
    assert wire.endswith(DONE) and b"event:" not in wire


def test_reasoning_and_tool_calls_numbered_in_order() -> None:
    wire = encode([
        ir.MessageStart(),
        ir.BlockStart(0, "reasoning"), ir.BlockDelta(0, "reasoning", "think"),
        ir.BlockDelta(0, "signature", "sig"), ir.BlockStop(0),
        ir.BlockStart(1, "tool_call", id="call_a", name="f"), ir.BlockDelta(1, "arguments", '{"x":'),
        ir.BlockDelta(1, "arguments", "1}"), ir.BlockStop(1),
        ir.BlockStart(2, "tool_call", id="call_b", name="g"), ir.BlockDelta(2, "arguments", "{}"), ir.BlockStop(2),
        ir.Finish(F.TOOL_CALLS),
    ], CTX)
    assert wire_payloads(wire) == [
        ROLE,
        chunk({"reasoning_content": "think"}),
        chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                               "function": {"name": "f", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"x":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                               "function": {"name": "g", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]}),
        chunk({}, "tool_calls"),
        "[DONE]",
    ]


def test_role_only_in_the_first_chunk_and_same_id_everywhere() -> None:
    payloads = wire_payloads(encode([ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "a"),
                                     ir.BlockStop(0), ir.Finish(F.STOP)]))
    chunks = [p for p in payloads if isinstance(p, dict)]
    assert ["role" in c["choices"][0]["delta"] for c in chunks] == [True, False, False]
    assert len({(c["id"], c["created"], c["model"]) for c in chunks}) == 1


def test_generated_id_has_the_chatcmpl_prefix() -> None:
    first = wire_payloads(b"".join(stream_encoder(EncodeContext(model="m")).feed(ir.MessageStart())))[0]
    assert first["id"].startswith("chatcmpl-") and len(first["id"]) > len("chatcmpl-")


def test_usage_arriving_after_finish_is_merged_into_the_last_chunk() -> None:
    payloads = wire_payloads(encode([
        ir.MessageStart(usage=ir.Usage(input_tokens=100, cached_tokens=40)),
        ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "x"), ir.BlockStop(0),
        ir.Usage(output_tokens=1), ir.Finish(F.STOP), ir.Usage(output_tokens=7, reasoning_tokens=2),
    ], CTX))
    assert payloads[-2]["usage"] == {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107,
                                     "prompt_tokens_details": {"cached_tokens": 40},
                                     "completion_tokens_details": {"reasoning_tokens": 2}}
    assert all("usage" not in p for p in payloads[:-2])


def test_no_usage_known_means_no_usage_field() -> None:
    payloads = wire_payloads(encode([ir.MessageStart(), ir.Finish(F.STOP)], CTX))
    assert payloads == [ROLE, chunk({}, "stop"), "[DONE]"]


def test_finish_raw_value_of_chat_is_reused_and_foreign_is_mapped() -> None:
    assert wire_payloads(encode([ir.MessageStart(), ir.Finish(F.TOOL_CALLS, raw="function_call")]))[-2][
        "choices"][0]["finish_reason"] == "function_call"
    assert wire_payloads(encode([ir.MessageStart(), ir.Finish(F.LENGTH, raw="max_tokens")]))[-2][
        "choices"][0]["finish_reason"] == "length"


def test_error_writes_the_error_ending_at_once_and_nothing_after() -> None:
    encoder = stream_encoder(CTX)
    out = encoder.feed(ir.MessageStart()) + encoder.feed(ir.BlockStart(0, "text"))
    out += encoder.feed(ir.BlockDelta(0, "text", "part"))
    ending = encoder.feed(ir.Error(message="Overloaded", error_type="overloaded_error", status=529, code="529"))
    assert wire_payloads(b"".join(ending)) == [
        chunk({}, "error", error={"message": "Overloaded", "type": "overloaded_error", "param": None, "code": "529"}),
        "[DONE]"]
    assert encoder.feed(ir.BlockDelta(0, "text", "late")) == []
    assert encoder.feed(ir.Finish(F.STOP)) == [] and encoder.finish() == []


def test_error_before_anything_still_starts_the_stream() -> None:
    payloads = wire_payloads(encode([ir.Error(message="boom")], CTX))
    assert payloads[0] == ROLE and payloads[-1] == "[DONE]"
    assert payloads[1]["error"] == {"message": "boom", "type": "api_error", "param": None, "code": None}


def test_finish_without_finish_reason_is_an_error_ending() -> None:
    payloads = wire_payloads(encode([ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "a")],
                                    CTX))
    assert payloads[-2]["choices"][0]["finish_reason"] == "error"
    assert payloads[-2]["error"]["message"] == "upstream ended without a finish reason"
    assert payloads[-1] == "[DONE]"


def test_finish_is_idempotent() -> None:
    encoder = stream_encoder(CTX)
    encoder.feed(ir.MessageStart())
    encoder.feed(ir.Finish(F.STOP))
    assert encoder.finish()[-1] == DONE
    assert encoder.finish() == [] and encoder.feed(ir.Usage(input_tokens=1)) == []


def test_signature_redacted_and_foreign_server_tool_blocks_are_dropped() -> None:
    payloads = wire_payloads(encode([
        ir.MessageStart(),
        ir.BlockStart(0, "reasoning"), ir.BlockDelta(0, "redacted", "opaque"), ir.BlockDelta(0, "signature", "s"),
        ir.BlockStop(0),
        ir.BlockStart(1, "server_tool", raw={"type": "server_tool_use", "id": "srv"}, raw_protocol="anthropic"),
        ir.BlockDelta(1, "text", "raw text"), ir.BlockStop(1),
        ir.BlockStart(2, "tool_call", id="c", name="f"), ir.BlockStop(2),
        ir.Finish(F.TOOL_CALLS),
    ], CTX))
    assert payloads == [
        ROLE,
        chunk({"tool_calls": [{"index": 0, "id": "c", "type": "function", "function": {"name": "f", "arguments": ""}}]}),
        chunk({}, "tool_calls"), "[DONE]"]


def test_chat_born_server_tool_block_is_re_emitted_verbatim() -> None:
    raw = {"annotations": [{"type": "url_citation", "url_citation": {"url": "https://x"}}]}
    payloads = wire_payloads(encode([ir.MessageStart(), ir.BlockStart(0, "server_tool", raw=raw,
                                                                      raw_protocol="openai_chat"),
                                     ir.BlockStop(0), ir.Finish(F.STOP)], CTX))
    assert payloads[1] == chunk(raw)


def test_empty_deltas_and_deltas_of_unknown_blocks_write_nothing() -> None:
    payloads = wire_payloads(encode([ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", ""),
                                     ir.BlockDelta(5, "text", "orphan"), ir.BlockDelta(0, "arguments", "{}"),
                                     ir.BlockStop(0), ir.BlockDelta(0, "text", "after stop"), ir.Finish(F.STOP)],
                                    CTX))
    assert payloads == [ROLE, chunk({}, "stop"), "[DONE]"]


def test_tool_call_without_id_or_name_gets_an_id_and_empty_name() -> None:
    payloads = wire_payloads(encode([ir.MessageStart(), ir.BlockStart(0, "tool_call"), ir.BlockStop(0),
                                     ir.Finish(F.TOOL_CALLS)], CTX))
    call = payloads[1]["choices"][0]["delta"]["tool_calls"][0]
    assert call["id"].startswith("call_") and call["function"]["name"] == ""


def test_events_without_message_start_still_begin_with_the_role_chunk() -> None:
    payloads = wire_payloads(encode([ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "x"), ir.BlockStop(0),
                                     ir.Finish(F.STOP)], CTX))
    assert payloads[:2] == [ROLE, chunk({"content": "x"})]


# ------------------------------------------------------------ refusals, logprobs, citations

TOKENS = [{"token": "No", "logprob": -0.1, "bytes": [78, 111], "top_logprobs": []}]


def test_refusal_streams_in_refusal_never_in_content_and_finishes_stop() -> None:
    payloads = wire_payloads(encode([
        ir.MessageStart(), ir.BlockStart(0, "refusal"), ir.BlockDelta(0, "refusal", "I can't"),
        ir.BlockDelta(0, "refusal", " help."), ir.BlockStop(0), ir.Finish(F.REFUSAL, raw="stop")], CTX))
    deltas = [p["choices"][0]["delta"] for p in payloads[1:-1]]
    assert deltas == [{"refusal": "I can't"}, {"refusal": " help."}, {}]
    assert payloads[-2]["choices"][0]["finish_reason"] == "stop"


def test_refusal_without_a_message_is_a_content_filter() -> None:
    # Anthropic's classifier stopped the answer: nothing in `refusal` says so, the finish reason must.
    payloads = wire_payloads(encode([ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "Su"),
                                     ir.BlockStop(0), ir.Finish(F.REFUSAL, raw="refusal")], CTX))
    assert payloads[-2]["choices"][0]["finish_reason"] == "content_filter"


def test_logprobs_ride_on_the_chunk_of_their_text() -> None:
    payloads = wire_payloads(encode([
        ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "logprobs", "", data={"content": TOKENS}),
        ir.BlockDelta(0, "text", "No"), ir.BlockDelta(0, "text", "!"), ir.BlockStop(0), ir.Finish(F.STOP)], CTX))
    first, second = payloads[1]["choices"][0], payloads[2]["choices"][0]
    assert first["delta"] == {"content": "No"} and first["logprobs"] == {"content": TOKENS, "refusal": None}
    assert second["delta"] == {"content": "!"} and second["logprobs"] is None


def test_refusal_logprobs_go_to_logprobs_refusal() -> None:
    payloads = wire_payloads(encode([
        ir.MessageStart(), ir.BlockStart(0, "refusal"), ir.BlockDelta(0, "logprobs", "", data={"content": TOKENS}),
        ir.BlockDelta(0, "refusal", "No"), ir.BlockStop(0), ir.Finish(F.REFUSAL)], CTX))
    assert payloads[1]["choices"][0]["logprobs"] == {"content": None, "refusal": TOKENS}


def test_logprobs_no_text_followed_still_reach_the_client() -> None:
    payloads = wire_payloads(encode([
        ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "logprobs", "", data={"content": TOKENS}),
        ir.BlockStop(0), ir.Finish(F.STOP)], CTX))
    assert payloads[1]["choices"][0] == {"index": 0, "delta": {}, "logprobs": {"content": TOKENS, "refusal": None},
                                         "finish_reason": None}


def url(start: int, end: int, link: str = "https://e.x/") -> dict[str, Any]:
    return {"type": "url_citation", "url": link, "title": "E", "cited_text": None, "start_index": start,
            "end_index": end, "raw": {}}


def test_citations_go_out_once_before_the_finish_indexed_into_the_whole_content() -> None:
    payloads = wire_payloads(encode([
        ir.MessageStart(),
        ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "Intro. "), ir.BlockStop(0),
        ir.BlockStart(1, "text"), ir.BlockDelta(1, "text", "Cited fact."),
        ir.BlockDelta(1, "citation", "", data=url(0, 11)), ir.BlockStop(1),
        ir.BlockStart(2, "text"), ir.BlockDelta(2, "text", " More"),
        ir.BlockDelta(2, "citation", "", data=url(1, 5, "https://f.x/")), ir.BlockStop(2),
        ir.BlockStart(3, "text"), ir.BlockDelta(3, "citation", "", data={**url(0, 0), "type": "char_location"}),
        ir.BlockStop(3), ir.Finish(F.STOP)], CTX))
    content = "".join(p["choices"][0]["delta"].get("content") or "" for p in payloads[:-1])
    [notes] = [p["choices"][0]["delta"]["annotations"] for p in payloads[:-1]
               if "annotations" in p["choices"][0]["delta"]]
    assert payloads[-3]["choices"][0]["delta"] == {"annotations": notes}  # right before the finish chunk
    spans = [(n["url_citation"]["url"], content[n["url_citation"]["start_index"]:n["url_citation"]["end_index"]])
             for n in notes]
    assert spans == [("https://e.x/", "Cited fact."), ("https://f.x/", "More")]  # the document location is left out
    assert notes[0] == {"type": "url_citation", "url_citation": {"url": "https://e.x/", "title": "E",
                                                                 "start_index": 7, "end_index": 18}}


def test_error_ending_carries_code_and_param() -> None:
    payloads = wire_payloads(encode([ir.MessageStart(), ir.Error(
        message="too long", error_type="invalid_request_error", status=400, code="context_length_exceeded",
        param="messages")], CTX))
    assert payloads[-2]["error"] == {"message": "too long", "type": "invalid_request_error", "param": "messages",
                                     "code": "context_length_exceeded"}
