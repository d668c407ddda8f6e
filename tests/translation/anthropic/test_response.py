import json
from typing import Any

import pytest
from anthropic.types import Message

from tests.fixtures.recorded_loader import Recording
from tests.translation.summary import summary_of
from translation import anthropic, ir
from translation.protocol import EncodeContext

from .helpers import comparable, recordings
from .sdk_readback import summary_from_json

CTX = EncodeContext(model="client-model", id="msg_fixed")


def recorded(suffix: str) -> Recording:
    [rec] = [r for r in recordings(stream=False) if r.name.endswith(suffix)]
    return rec


def cassette_bodies(name: str) -> list[dict[str, Any]]:
    """The non-streamed interactions of one pydantic-ai cassette, as JSON."""

    return [json.loads(r.body) for r in recordings(stream=False) if f"/{name}#" in r.name and r.status < 400]


# ----------------------------------------------------------------- parse_response


def test_parses_recorded_text_response() -> None:
    resp = anthropic.parse_response(recorded("anthropic-text.json").body)
    assert resp.id == "msg_01VdEjxAP5ahtHKrrRdNBteQ" and resp.model == "claude-sonnet-4-5-20250929"
    assert [b.kind for b in resp.blocks] == ["text"]
    assert resp.blocks[0].text.startswith("Hello! I'm doing well, thanks for asking.")
    assert resp.finish == ir.Finish(ir.FinishReason.STOP, raw="end_turn")
    assert resp.usage == ir.Usage(input_tokens=12, output_tokens=29, cached_tokens=0, cache_creation_tokens=0,
                                  cache_creation_1h_tokens=0)


def test_parses_recorded_refusal_without_content() -> None:
    resp = anthropic.parse_response(recorded("anthropic-refusal.json").body)
    assert [b.kind for b in resp.blocks] == ["refusal"] and resp.finish is not None
    assert resp.blocks[0].text.startswith("This request triggered restrictions")
    assert (resp.finish.reason, resp.finish.raw) == (ir.FinishReason.REFUSAL, "refusal")
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (18, 5)


def test_parses_recorded_tool_call_without_arguments() -> None:
    resp = anthropic.parse_response(json.loads(recorded("anthropic-tool-no-args.json").body))
    tool = resp.blocks[1]
    assert (tool.kind, tool.id, tool.name, tool.text) == ("tool_call", "toolu_01LRmxn9vGM1d2DZSDBowdZ1",
                                                          "updateIssueList", "{}")
    assert resp.finish is not None and resp.finish.reason == ir.FinishReason.TOOL_CALLS
    assert resp.usage.input_tokens == 602


def test_server_blocks_are_kept_verbatim_and_citations_dropped() -> None:
    body = json.loads(recorded("anthropic-web-search-tool.1.json").body)
    resp = anthropic.parse_response(body)
    server = [b for b in resp.blocks if b.kind == "server_tool"]
    assert server[0].raw == body["content"][0] and server[0].raw_protocol == "anthropic"
    assert body["content"][0]["name"] == "web_search"
    assert {b.raw["type"] for b in server if b.raw} == {"server_tool_use", "web_search_tool_result"}
    cited = [item for item in body["content"] if item["type"] == "text" and item.get("citations")]
    assert cited, "the recording has cited text"
    texts = [b for b in resp.blocks if b.kind == "text"]
    assert "".join(b.text for b in texts) == "".join(i["text"] for i in body["content"] if i["type"] == "text")


def test_programmatic_tool_call_keeps_arguments_and_drops_caller() -> None:
    resp = anthropic.parse_response(recorded("092be1de-d3f8-4c22-a4ea-a7ad54689836.json#1").body)
    [block] = resp.blocks
    assert json.loads(block.text) == {"location": "New York, NY", "units": "c"}
    assert resp.usage.input_tokens == 0 and resp.finish is not None and resp.finish.raw == "tool_use"


def test_parses_redacted_thinking_from_cassette() -> None:
    body = cassette_bodies("test_anthropic_model_thinking_part_redacted.yaml")[0]
    resp = anthropic.parse_response(body)
    assert resp.blocks[0].kind == "reasoning" and resp.blocks[0].redacted == body["content"][0]["data"]
    assert resp.blocks[1].text.startswith("I notice that your message appears to contain a command")
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (92, 196)


def test_parses_thinking_with_signature_from_cassette() -> None:
    body = cassette_bodies("test_anthropic_tool_with_thinking.yaml")[0]
    resp = anthropic.parse_response(body)
    thinking = [b for b in resp.blocks if b.kind == "reasoning"]
    wire = [c for c in body["content"] if c["type"] == "thinking"]
    assert thinking and thinking[0].text == wire[0]["thinking"] and thinking[0].signature == wire[0]["signature"]
    calls = [b for b in resp.blocks if b.kind == "tool_call"]
    assert calls and json.loads(calls[0].text) == [c for c in body["content"] if c["type"] == "tool_use"][0]["input"]


@pytest.mark.parametrize("bad", [b"not json", "[]", {"type": "message"}, {"content": [{"text": "no type"}]}, 7])
def test_unusable_body_is_a_decode_error(bad: Any) -> None:
    with pytest.raises(ir.DecodeError):
        anthropic.parse_response(bad)


def test_unknown_stop_reason_keeps_raw() -> None:
    resp = anthropic.parse_response({"content": [], "stop_reason": "something_new", "usage": {}})
    assert resp.finish == ir.Finish(ir.FinishReason.STOP, raw="something_new")


# ----------------------------------------------------------------- render_response


def full_response() -> ir.Response:
    return ir.Response(
        id="upstream-id", model="upstream-model",
        blocks=[
            ir.Block("reasoning", text="thinking hard", signature="sig=="),
            ir.Block("reasoning", text="from a chat upstream"),
            ir.Block("reasoning", redacted="opaque"),
            ir.Block("reasoning"),
            ir.Block("text", text="Answer."),
            ir.Block("tool_call", text='{"city": "Paris"}', id="toolu_1", name="get_weather"),
            ir.Block("tool_call", text="not json", id=None, name="broken"),
            ir.Block("server_tool", raw={"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                                         "input": {"query": "q"}}, raw_protocol="anthropic"),
            ir.Block("server_tool", raw={"type": "web_search_call", "id": "ws_1"}, raw_protocol="responses"),
        ],
        finish=ir.Finish(ir.FinishReason.TOOL_CALLS, raw="tool_calls"),
        usage=ir.Usage(input_tokens=1000, output_tokens=50, cached_tokens=600, cache_creation_tokens=100),
    )


def test_render_full_response() -> None:
    out = anthropic.render_response(full_response(), CTX)
    assert out["id"] == "msg_fixed" and out["model"] == "client-model"
    assert (out["type"], out["role"], out["stop_reason"], out["stop_sequence"]) == ("message", "assistant",
                                                                                     "tool_use", None)
    content = out["content"]
    assert content[0] == {"type": "thinking", "thinking": "thinking hard", "signature": "sig=="}
    assert content[1] == {"type": "thinking", "thinking": "from a chat upstream", "signature": ""}
    assert content[2] == {"type": "redacted_thinking", "data": "opaque"}
    assert content[3] == {"type": "text", "text": "Answer."}
    assert content[4] == {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
    assert content[5]["input"] == {} and content[5]["id"].startswith("toolu_")
    assert content[6]["type"] == "server_tool_use"
    assert len(content) == 7  # the empty reasoning block and the Responses item are dropped
    assert out["usage"] == {"input_tokens": 300, "output_tokens": 50, "cache_creation_input_tokens": 100,
                            "cache_read_input_tokens": 600}
    Message.model_validate(out)


def test_render_generates_an_id_and_defaults_the_stop_reason() -> None:
    out = anthropic.render_response(ir.Response(), EncodeContext(model="m"))
    assert out["id"].startswith("msg_") and out["stop_reason"] == "end_turn" and out["content"] == []
    Message.model_validate(out)


def test_render_keeps_stop_sequence() -> None:
    resp = ir.Response(finish=ir.Finish(ir.FinishReason.STOP, raw="stop_sequence", stop_sequence="###"))
    out = anthropic.render_response(resp, CTX)
    assert (out["stop_reason"], out["stop_sequence"]) == ("stop_sequence", "###")


JSON_RECORDINGS = [r for r in recordings(stream=False) if r.status < 400]


@pytest.mark.parametrize("rec", JSON_RECORDINGS, ids=lambda r: r.name[-60:])
def test_recorded_json_round_trips_through_the_sdk_model(rec: Recording) -> None:
    resp = anthropic.parse_response(rec.body)
    out = anthropic.render_response(resp, CTX)
    assert comparable(summary_from_json(out)) == comparable(summary_of(resp))
    again = anthropic.parse_response(out)
    assert again.blocks == resp.blocks and again.usage.input_tokens == resp.usage.input_tokens


@pytest.mark.parametrize("name", ["test_anthropic_model_thinking_part_redacted.yaml",
                                  "test_anthropic_tool_with_thinking.yaml"])
def test_cassette_json_round_trips_through_the_sdk_model(name: str) -> None:
    bodies = cassette_bodies(name)
    assert len(bodies) == 2
    for body in bodies:
        resp = anthropic.parse_response(body)
        out = anthropic.render_response(resp, CTX)
        assert comparable(summary_from_json(out)) == comparable(summary_of(resp))
        assert comparable(summary_from_json(body)) == comparable(summary_of(resp))


def test_text_block_citations_are_parsed_spanning_the_block() -> None:
    cited = {"type": "web_search_result_location", "cited_text": "c", "url": "https://e.x/", "title": "E",
             "encrypted_index": "Eo"}
    body = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": "A fact.", "citations": [cited]}],
            "usage": {"input_tokens": 1, "output_tokens": 1}}
    [text] = anthropic.parse_response(body).blocks
    assert [(c["type"], c["url"], c["start_index"], c["end_index"], c["raw"]) for c in text.citations] == [
        ("url_citation", "https://e.x/", 0, 7, cited)]


def test_rendered_message_carries_citations_and_the_refusal_as_stop_details() -> None:
    resp = ir.Response(blocks=[
        ir.Block("text", text="Rain in Paris.", citations=[{
            "type": "url_citation", "url": "https://e.x/", "title": "E", "start_index": 8, "end_index": 13,
            "raw": {"type": "url_citation"}}], logprobs=[{"token": "Rain", "logprob": 0.0}]),
        ir.Block("refusal", text="No more.")], finish=ir.Finish(ir.FinishReason.REFUSAL, raw="stop"))
    body = anthropic.render_response(resp, EncodeContext(model="claude", id="msg_x"))
    assert body["content"] == [{"type": "text", "text": "Rain in Paris.", "citations": [
        {"type": "web_search_result_location", "cited_text": "Paris", "url": "https://e.x/", "title": "E",
         "encrypted_index": ""}]}]
    assert (body["stop_reason"], body["stop_details"]) == (
        "refusal", {"type": "refusal", "category": None, "explanation": "No more."})
    message = Message.model_validate(body)
    assert message.stop_details is not None and message.stop_details.explanation == "No more."
