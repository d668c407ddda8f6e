"""parse_response (upstream chat.completion → IR) and render_response (IR → client JSON)."""

import json
from typing import Any

import pytest
from openai.types.chat import ChatCompletion

from tests.fixtures.recorded_loader import recordings
from tests.translation.summary import summary_of
from translation import fold, ir
from translation.openai_chat import parse_response, render_response
from translation.protocol import EncodeContext

from .sdk_readback import summary_from_json

CTX = EncodeContext(model="client-model", id="chatcmpl-fixed", created=1700000000)


def recorded_json(suffix: str) -> dict[str, Any]:
    [rec] = [r for r in recordings(protocol="openai_chat", stream=False) if r.name.endswith(suffix)]
    return json.loads(rec.body)  # type: ignore[no-any-return]


def completion(message: dict[str, Any], finish_reason: Any = "stop", **extra: Any) -> dict[str, Any]:
    body = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "up-model",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}]}
    body.update(extra)
    return body


def test_parses_recorded_deepseek_reasoning_response() -> None:
    resp = parse_response(recorded_json("deepseek-reasoning.json"))
    assert resp.id == "945bb10c-9bf3-47ff-a2a2-43bbe9705c72" and resp.model == "deepseek-reasoner"
    assert [b.kind for b in resp.blocks] == ["reasoning", "text"]
    assert resp.blocks[0].text.startswith("We are asked: \"How many 'r's")
    assert resp.blocks[1].text.startswith("The word \"strawberry\" contains three")
    assert resp.finish == ir.Finish(ir.FinishReason.STOP, raw="stop")
    assert resp.usage == ir.Usage(input_tokens=18, output_tokens=345, cached_tokens=0, reasoning_tokens=315)


def test_parses_recorded_deepseek_tool_call_response_with_empty_content() -> None:
    resp = parse_response(recorded_json("deepseek-tool-call.json"))
    assert [b.kind for b in resp.blocks] == ["reasoning", "tool_call"]
    call = resp.blocks[1]
    assert (call.id, call.name, json.loads(call.text)) == (
        "call_00_9V0vrf86Pc9aelHCJMZqnJBo", "weather", {"location": "San Francisco"})
    assert resp.finish is not None and resp.finish.reason is ir.FinishReason.TOOL_CALLS
    assert resp.usage.cached_tokens == 320 and resp.usage.reasoning_tokens == 48


def test_parses_recorded_openai_text_response() -> None:
    resp = parse_response(recorded_json("openai-text.json"))
    assert [b.kind for b in resp.blocks] == ["text"]
    assert resp.blocks[0].text.startswith("**Holiday Name:** Galaxy Day")
    assert resp.usage == ir.Usage(input_tokens=16, output_tokens=363, cached_tokens=0, reasoning_tokens=0)


def test_every_recorded_non_stream_success_parses() -> None:
    for rec in recordings(protocol="openai_chat", stream=False):
        if rec.status < 400:
            resp = parse_response(rec.body)
            assert resp.blocks and resp.finish is not None, rec.name


def test_refusal_and_openrouter_reasoning_field() -> None:
    resp = parse_response(completion({"content": None, "refusal": "I can't help with that.",
                                      "reasoning": "policy"}))
    assert [(b.kind, b.text) for b in resp.blocks] == [("reasoning", "policy"), ("refusal", "I can't help with that.")]
    assert resp.finish == ir.Finish(ir.FinishReason.REFUSAL, raw="stop")


def test_content_as_text_parts_and_arguments_as_object() -> None:
    resp = parse_response(completion({
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}],
    }, "tool_calls"))
    assert [(b.kind, b.text) for b in resp.blocks] == [("text", "ab"), ("tool_call", '{"x":1}')]


def test_unknown_finish_reason_is_stop_with_raw() -> None:
    resp = parse_response(completion({"content": "x"}, "eos"))
    assert resp.finish == ir.Finish(ir.FinishReason.STOP, raw="eos")


def test_error_body_becomes_response_error() -> None:
    resp = parse_response({"error": {"message": "overloaded", "type": "server_error", "code": 503}})
    assert resp.error is not None and resp.error.status == 503 and resp.error.message == "overloaded"


@pytest.mark.parametrize("bad", [b"not json", "[]", [], {"id": "x", "choices": []}, {"choices": ["x"]},
                                 {"choices": [{"message": "text"}]}])
def test_unusable_bodies_raise_decode_error(bad: Any) -> None:
    with pytest.raises(ir.DecodeError):
        parse_response(bad)


# ------------------------------------------------------------ render


def test_render_full_shape() -> None:
    resp = ir.Response(id="up-id", model="up-model", blocks=[
        ir.Block("reasoning", text="think", signature="sig-dropped"),
        ir.Block("text", text="Hello"),
        ir.Block("server_tool", raw={"type": "web_search_tool_result"}, raw_protocol="anthropic"),
        ir.Block("tool_call", text='{"a":1}', id="call_1", name="f"),
    ], finish=ir.Finish(ir.FinishReason.TOOL_CALLS, raw="tool_use"),
        usage=ir.Usage(input_tokens=10, output_tokens=5, cached_tokens=3, reasoning_tokens=2))
    assert render_response(resp, CTX) == {
        "id": "chatcmpl-fixed", "object": "chat.completion", "created": 1700000000, "model": "client-model",
        "choices": [{"index": 0, "logprobs": None, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Hello", "refusal": None, "reasoning_content": "think",
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}],
        }}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
                  "prompt_tokens_details": {"cached_tokens": 3},
                  "completion_tokens_details": {"reasoning_tokens": 2}},
    }


def test_render_tool_calls_only_has_null_content_and_generated_id() -> None:
    out = render_response(ir.Response(blocks=[ir.Block("tool_call", text="{}", name="f")],
                                      finish=ir.Finish(ir.FinishReason.TOOL_CALLS)), EncodeContext(model="m"))
    message = out["choices"][0]["message"]
    assert message["content"] is None and "reasoning_content" not in message
    assert message["tool_calls"][0]["id"].startswith("call_")
    assert out["id"].startswith("chatcmpl-")


def test_render_without_finish_is_stop() -> None:
    out = render_response(ir.Response(blocks=[ir.Block("text", text="x")]), CTX)
    assert out["choices"][0]["finish_reason"] == "stop"


def test_rendered_recordings_validate_with_the_sdk_model_and_read_back_equal() -> None:
    for rec in recordings(protocol="openai_chat", stream=False):
        if rec.status >= 400:
            continue
        resp = parse_response(rec.body)
        rendered = render_response(resp, CTX)
        ChatCompletion.model_validate(rendered)
        assert summary_from_json(rendered) == summary_of(resp), rec.name


def test_parse_of_render_is_identity_on_the_ir() -> None:
    resp = ir.Response(blocks=[ir.Block("reasoning", text="r"), ir.Block("text", text="t"),
                               ir.Block("tool_call", text='{"q":"x"}', id="c1", name="search")],
                       finish=ir.Finish(ir.FinishReason.TOOL_CALLS, raw="tool_calls"),
                       usage=ir.Usage(input_tokens=1, output_tokens=2, cached_tokens=0, reasoning_tokens=1))
    back = parse_response(render_response(resp, CTX))
    assert back.blocks == resp.blocks and back.finish == resp.finish and back.usage == resp.usage


def test_render_of_a_folded_stream_equals_its_fold() -> None:
    events: list[ir.Event] = [
        ir.MessageStart(id="x", model="y"),
        ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "Hel"), ir.BlockDelta(0, "text", "lo"), ir.BlockStop(0),
        ir.Usage(input_tokens=3, output_tokens=2), ir.Finish(ir.FinishReason.LENGTH),
    ]
    resp = fold.fold(events)
    assert summary_from_json(render_response(resp, CTX)) == summary_of(resp)


def test_annotations_and_logprobs_are_parsed_onto_the_text_and_refusal_blocks() -> None:
    token = {"token": "A", "logprob": -0.25, "bytes": [65], "top_logprobs": []}
    body = completion({"content": "A fact.", "refusal": None, "annotations": [
        {"type": "url_citation", "url_citation": {"url": "https://a.x/", "title": "A", "start_index": 2,
                                                  "end_index": 6}}]})
    body["choices"][0]["logprobs"] = {"content": [token], "refusal": None}
    [text] = parse_response(body).blocks
    assert text.logprobs == [token]
    [cite] = text.citations
    assert (cite["url"], text.text[cite["start_index"]:cite["end_index"]]) == ("https://a.x/", "fact")


def test_render_keeps_refusal_in_refusal_and_reindexes_citations_into_the_whole_content() -> None:
    token = {"token": "No", "logprob": -0.1, "bytes": [78, 111], "top_logprobs": []}
    resp = ir.Response(blocks=[
        ir.Block("text", text="One. "),
        ir.Block("text", text="Two.", citations=[{"type": "url_citation", "url": "https://t.x/", "title": "T",
                                                  "start_index": 0, "end_index": 3, "raw": {}}]),
        ir.Block("refusal", text="No.", logprobs=[token])],
        finish=ir.Finish(ir.FinishReason.REFUSAL, raw="completed"))
    body = render_response(resp, EncodeContext(model="m", id="chatcmpl-x", created=1))
    message = body["choices"][0]["message"]
    assert (message["content"], message["refusal"]) == ("One. Two.", "No.")
    [note] = message["annotations"]
    start, end = note["url_citation"]["start_index"], note["url_citation"]["end_index"]
    assert message["content"][start:end] == "Two"
    assert body["choices"][0]["logprobs"] == {"content": None, "refusal": [token]}
    assert body["choices"][0]["finish_reason"] == "stop"  # the refusal message is the signal
    ChatCompletion.model_validate(body)
