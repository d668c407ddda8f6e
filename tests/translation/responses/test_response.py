import json

import pytest
from openai.types.responses import Response

from tests.fixtures.recorded_loader import ROOT
from tests.translation.responses.helpers import parsed_bodies
from tests.translation.responses.sdk_readback import summary_from_json
from tests.translation.summary import summary_of
from translation import ir
from translation.protocol import EncodeContext
from translation.responses import parse_error, parse_response, render_response

VERCEL = "vercel-ai/packages/openai/src/responses/__fixtures__/"
MODIFIED_HISTORY = ("pydantic-ai/tests/models/cassettes/test_openai_responses/"
                    "test_openai_responses_thinking_with_modified_history.yaml")


def recorded(name: str) -> dict:
    return json.loads((ROOT / VERCEL / name).read_text())


def test_parses_recorded_reasoning_and_message():
    resp = parse_response(recorded("openai-reasoning-encrypted-content.1.json"))
    assert resp.id == "resp_0f35ed53160b395301693cc957829881909359e7f80cdd20b5"
    assert resp.model == "gpt-5-mini-2025-08-07"
    reasoning, text = resp.blocks
    assert reasoning.kind == "reasoning" and reasoning.id == "rs_0f35ed53160b395301693cc95817ac8190b978637daea4987e"
    assert reasoning.text.startswith("**Reporting final result**\n\nThe tool returned 570")
    assert reasoning.signature is not None and reasoning.signature.startswith("gAAAAABpPMlcH0HHEv5_")
    assert text.kind == "text" and text.text.endswith("Final result: 570")
    assert resp.finish == ir.Finish(ir.FinishReason.STOP, raw="completed")
    assert resp.usage == ir.Usage(input_tokens=865, output_tokens=163, cached_tokens=0, reasoning_tokens=128)


def test_parses_builtin_items_as_server_tool_blocks():
    body = recorded("openai-web-search-tool.1.json")
    resp = parse_response(body)
    kinds = [b.kind for b in resp.blocks]
    assert kinds == ["reasoning", "server_tool", "reasoning", "server_tool", "reasoning", "server_tool",
                     "reasoning", "text"]
    search = resp.blocks[1]
    assert search.raw == body["output"][1] and search.raw_protocol == "responses"
    assert search.name == "web_search_call" and search.id == "ws_0953eda47ee1741200693330682c988195aaa470a8cc51dfe4"
    assert resp.usage.cached_tokens == 3712 and resp.usage.reasoning_tokens == 3136


def test_parses_recorded_json_bodies_the_loader_misses():
    (status, first), (err_status, err), (_, second) = parsed_bodies(MODIFIED_HISTORY)
    assert (status, err_status) == (200, 400)
    resp = parse_response(first)
    assert resp.id == "resp_68c42ddf9bbc8194aa7b97304dd909cb0202c9ad459e0d23"
    assert [b.kind for b in resp.blocks][0] == "reasoning"
    assert resp.blocks[0].signature.startswith("gAAAAABoxC3jL8rEbUKD8lpf1c")
    assert parse_response(second).finish is not None


@pytest.mark.parametrize("cassette", ["test_openai_responses_thinking_with_modified_history.yaml",
                                      "test_openai_responses_model_web_search_tool_stream.yaml"])
def test_every_recorded_parsed_body_parses_or_is_an_error(cassette):
    for status, body in parsed_bodies("pydantic-ai/tests/models/cassettes/test_openai_responses/" + cassette):
        if body is None:
            continue  # a streamed interaction
        if status >= 400:
            assert parse_error(status, body).status == status
            continue
        resp = parse_response(body)
        assert resp.id and resp.blocks and resp.finish is not None
        assert summary_from_json(render_response(resp, CTX)) == summary_of(resp)


def test_function_calls_and_status():
    resp = parse_response({"id": "r", "status": "completed", "output": [
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{\"a\":1}"},
        {"type": "message", "id": "m", "role": "assistant", "status": "completed", "content": [
            {"type": "output_text", "text": "x", "annotations": []},
            {"type": "refusal", "refusal": "no"}]},
    ]})
    assert [(b.kind, b.text, b.id, b.name) for b in resp.blocks] == [
        ("tool_call", "{\"a\":1}", "call_1", "f"), ("text", "x", None, None), ("refusal", "no", None, None)]
    assert resp.finish == ir.Finish(ir.FinishReason.TOOL_CALLS, raw="completed")


@pytest.mark.parametrize("details, reason", [
    ({"reason": "max_output_tokens"}, ir.FinishReason.LENGTH),
    ({"reason": "content_filter"}, ir.FinishReason.CONTENT_FILTER),
])
def test_incomplete_maps_to_finish(details, reason):
    resp = parse_response({"status": "incomplete", "incomplete_details": details, "output": []})
    assert resp.finish == ir.Finish(reason, raw=details["reason"])


def test_failed_response_is_an_error():
    resp = parse_response(b'{"id": "r", "status": "failed", "output": [], '
                          b'"error": {"code": "rate_limit_exceeded", "message": "slow down"}}')
    assert resp.finish is None
    assert resp.error == ir.Error(message="slow down", error_type="rate_limit_exceeded", status=429,
                                  code="rate_limit_exceeded")


@pytest.mark.parametrize("bad", [b"not json", "[1]", 5, {"output": {}}, {"output": [1]}])
def test_undecodable_bodies_raise_decode_error(bad):
    with pytest.raises(ir.DecodeError):
        parse_response(bad)


# ------------------------------------------------------------------ render

CTX = EncodeContext(model="client-model", id="resp_fixed", created=1700000000)
SEARCH = {"type": "web_search_call", "id": "ws_1", "status": "completed",
          "action": {"type": "search", "query": "weather"}}


def full_response() -> ir.Response:
    return ir.Response(id="up", model="up-model", blocks=[
        ir.Block(kind="reasoning", text="Thinking.", signature="gAAAA-sig", id="rs_keep"),
        ir.Block(kind="text", text="Hello"),
        ir.Block(kind="tool_call", text="{\"x\":1}", id="call_7", name="f"),
        ir.Block(kind="server_tool", raw=SEARCH, raw_protocol="responses"),
        ir.Block(kind="server_tool", raw={"type": "server_tool_use", "id": "srvtoolu_1"}, raw_protocol="anthropic"),
    ], finish=ir.Finish(ir.FinishReason.TOOL_CALLS), usage=ir.Usage(input_tokens=10, output_tokens=5,
                                                                    cached_tokens=2, reasoning_tokens=3))


def test_render_has_every_field_and_valid_items():
    body = render_response(full_response(), CTX)
    Response.model_validate(body)
    assert body["id"] == "resp_fixed" and body["object"] == "response" and body["created_at"] == 1700000000
    assert body["model"] == "client-model" and body["status"] == "completed"
    for key in ("error", "incomplete_details", "instructions", "metadata", "parallel_tool_calls", "temperature",
                "tool_choice", "tools", "top_p", "max_output_tokens", "previous_response_id", "reasoning",
                "store", "truncation", "user", "text"):
        assert key in body
    reasoning, message, call, search = body["output"]
    assert reasoning == {"type": "reasoning", "id": "rs_keep", "encrypted_content": "gAAAA-sig",
                         "summary": [{"type": "summary_text", "text": "Thinking."}]}
    assert message["content"] == [{"type": "output_text", "text": "Hello", "annotations": []}]
    assert message["id"].startswith("msg_") and message["status"] == "completed"
    assert call["id"].startswith("fc_") and call["call_id"] == "call_7" and call["status"] == "completed"
    assert search == SEARCH
    assert body["usage"]["total_tokens"] == 15


def test_render_echoes_the_clients_request():
    client = {"model": "alias", "input": "x", "instructions": "Be terse.", "temperature": 0.3, "top_p": 0.5,
              "tools": [{"type": "web_search"}, {"type": "function", "name": "f", "parameters": {}}],
              "tool_choice": "required", "parallel_tool_calls": False, "max_output_tokens": 99,
              "metadata": {"a": "b"}, "reasoning": {"effort": "low"}, "store": False, "user": "u",
              "previous_response_id": "resp_prev", "truncation": "auto"}
    body = render_response(ir.Response(), EncodeContext(model="alias", body=client))
    Response.model_validate(body)
    for key in ("instructions", "temperature", "top_p", "tools", "tool_choice", "parallel_tool_calls",
                "max_output_tokens", "metadata", "store", "user", "previous_response_id", "truncation"):
        assert body[key] == client[key], key
    assert body["reasoning"] == {"effort": "low", "summary": None}


def test_render_derives_echo_from_the_ir_request_without_a_body():
    req = ir.Request(model="m", messages=[], system=[ir.TextPart("sys")], temperature=0.1,
                     tools=[ir.Tool("f", None, {"type": "object"})], tool_choice=ir.ToolChoice("named", name="f"),
                     max_tokens=7, reasoning=ir.Reasoning(effort="high"))
    body = render_response(ir.Response(), EncodeContext(model="m", request=req))
    Response.model_validate(body)
    assert body["instructions"] == "sys" and body["temperature"] == 0.1 and body["max_output_tokens"] == 7
    assert body["tool_choice"] == {"type": "function", "name": "f"}
    assert body["tools"][0]["name"] == "f" and body["reasoning"]["effort"] == "high"
    assert body["top_p"] == 1.0 and body["store"] is True


@pytest.mark.parametrize("finish, reason", [
    (ir.Finish(ir.FinishReason.LENGTH, raw="max_tokens"), "max_output_tokens"),
    (ir.Finish(ir.FinishReason.CONTENT_FILTER, raw="refusal"), "content_filter"),
])
def test_render_incomplete(finish, reason):
    body = render_response(ir.Response(blocks=[ir.Block(kind="text", text="cut")], finish=finish), CTX)
    Response.model_validate(body)
    assert body["status"] == "incomplete" and body["incomplete_details"] == {"reason": reason}


def test_render_failed_response_keeps_partial_output():
    resp = ir.Response(blocks=[ir.Block(kind="text", text="part")],
                       error=ir.Error("overloaded", error_type="overloaded_error", status=529))
    body = render_response(resp, CTX)
    Response.model_validate(body)
    assert body["status"] == "failed" and body["error"] == {"code": "server_error", "message": "overloaded"}
    assert summary_from_json(body).error == "overloaded"


def test_render_then_sdk_then_summary_matches_the_ir():
    resp = full_response()
    assert summary_from_json(render_response(resp, CTX)) == summary_of(resp)


def test_parse_render_round_trip_of_a_recorded_body():
    resp = parse_response(recorded("openai-web-search-tool.1.json"))
    again = parse_response(render_response(resp, CTX))
    assert [(b.kind, b.text, b.signature, b.raw) for b in again.blocks] == [
        (b.kind, b.text, b.signature, b.raw) for b in resp.blocks]
    assert again.finish == resp.finish
    # The rendered usage always carries cache_write_tokens; the recording did not say.
    assert again.usage == ir.Usage(**{**vars(resp.usage), "cache_creation_tokens": 0})
