"""build_request (IR → Chat upstream body) and passthrough_request."""

from typing import Any

import pytest

from translation import ir, repair
from translation.openai_chat import build_request, parse_request, passthrough_request

CAPS = ir.UpstreamCaps()
NO_THINKING = ir.UpstreamCaps(thinking=False)


def request(*messages: ir.Message, **fields: Any) -> ir.Request:
    return ir.Request(model="client-name", messages=list(messages) or [ir.Message("user", [ir.TextPart("hi")])],
                      **fields)


def test_model_is_the_resolved_one_and_stream_flag_is_explicit() -> None:
    out = build_request(request(), "gpt-4o-mini", CAPS)
    assert out["model"] == "gpt-4o-mini"
    assert out["stream"] is False
    assert "stream_options" not in out


def test_streaming_asks_for_usage() -> None:
    out = build_request(request(stream=True), "m", CAPS)
    assert out["stream"] is True
    assert out["stream_options"] == {"include_usage": True}


def test_system_parts_become_one_leading_system_message() -> None:
    out = build_request(request(system=[ir.TextPart("Be brief."), ir.TextPart("Answer in French.")]), "m", CAPS)
    assert out["messages"][0] == {"role": "system", "content": "Be brief.\n\nAnswer in French."}
    assert out["messages"][1] == {"role": "user", "content": "hi"}


def test_single_text_user_message_is_a_string_and_mixed_content_is_parts() -> None:
    out = build_request(request(
        ir.Message("user", [ir.TextPart("look"), ir.ImagePart(url="https://x/cat.png", detail="low"),
                            ir.ImagePart(data="AAAA", media_type="image/webp")]),
    ), "m", CAPS)
    assert out["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "https://x/cat.png", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": "data:image/webp;base64,AAAA"}},
    ]}]


def test_tool_results_become_tool_messages_before_the_users_own_content() -> None:
    out = build_request(request(
        ir.Message("user", [ir.TextPart("weather in Paris and Rome?")]),
        ir.Message("assistant", [ir.ToolCallPart("c1", "weather", '{"city":"Paris"}'),
                                 ir.ToolCallPart("c2", "weather", '{"city":"Rome"}')]),
        ir.Message("user", [ir.ToolResultPart("c1", [ir.TextPart("sunny")]),
                            ir.TextPart("and what about tomorrow?"),
                            ir.ToolResultPart("c2", [ir.TextPart("rain"), ir.TextPart(", 12C")])]),
    ), "m", CAPS)
    assert out["messages"][1:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}},
            {"id": "c2", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Rome"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "rain, 12C"},
        {"role": "user", "content": "and what about tomorrow?"},
    ]


def test_user_message_of_only_tool_results_emits_no_empty_user_message() -> None:
    out = build_request(request(
        ir.Message("user", [ir.TextPart("q")]),
        ir.Message("assistant", [ir.ToolCallPart("c1", "f", "{}")]),
        ir.Message("user", [ir.ToolResultPart("c1", [ir.TextPart("r")])]),
    ), "m", CAPS)
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "tool"]


def test_tool_result_is_error_and_images_have_no_chat_slot_and_are_dropped() -> None:
    out = build_request(request(
        ir.Message("user", [ir.TextPart("q")]),
        ir.Message("assistant", [ir.ToolCallPart("c1", "f", "{}")]),
        ir.Message("user", [ir.ToolResultPart("c1", [ir.TextPart("boom"), ir.ImagePart(url="https://x/i.png")],
                                              is_error=True)]),
    ), "m", CAPS)
    assert out["messages"][2] == {"role": "tool", "tool_call_id": "c1", "content": "boom"}


def test_assistant_reasoning_is_dropped_text_kept() -> None:
    out = build_request(request(
        ir.Message("user", [ir.TextPart("q")]),
        ir.Message("assistant", [ir.ReasoningPart("thinking...", signature="sig"), ir.TextPart("Answer.")]),
    ), "m", CAPS)
    assert out["messages"][1] == {"role": "assistant", "content": "Answer."}


def test_assistant_with_only_reasoning_is_skipped() -> None:
    out = build_request(request(
        ir.Message("user", [ir.TextPart("q")]),
        ir.Message("assistant", [ir.ReasoningPart("hmm", redacted="xyz")]),
        ir.Message("user", [ir.TextPart("again")]),
    ), "m", CAPS)
    assert [m["role"] for m in out["messages"]] == ["user", "user"]


def test_assistant_text_parts_around_tool_calls_are_joined() -> None:
    out = build_request(request(
        ir.Message("user", [ir.TextPart("q")]),
        ir.Message("assistant", [ir.TextPart("First."), ir.ToolCallPart("c", "f", "{}"), ir.TextPart("Second.")]),
        ir.Message("user", [ir.ToolResultPart("c", [ir.TextPart("ok")])]),
    ), "m", CAPS)
    assert out["messages"][1]["content"] == "First.\n\nSecond."
    assert out["messages"][1]["tool_calls"][0]["id"] == "c"


def test_orphan_tool_calls_get_a_synthetic_result() -> None:
    out = build_request(request(
        ir.Message("user", [ir.TextPart("q")]),
        ir.Message("assistant", [ir.ToolCallPart("lost", "f", "{}")]),
        ir.Message("user", [ir.TextPart("never mind")]),
    ), "m", CAPS)
    assert out["messages"][2:] == [
        {"role": "tool", "tool_call_id": "lost", "content": repair.ORPHAN_RESULT_TEXT},
        {"role": "user", "content": "never mind"},
    ]


def test_tools_and_tool_choice_by_the_sop_table() -> None:
    tools = [ir.Tool("get_weather", "Weather by city", {"type": "object", "properties": {}}),
             ir.Tool("now", None, {"type": "object"})]
    out = build_request(request(tools=tools, tool_choice=ir.ToolChoice("named", name="now")), "m", CAPS)
    assert out["tools"] == [
        {"type": "function", "function": {"name": "get_weather", "description": "Weather by city",
                                          "parameters": {"type": "object", "properties": {}}}},
        {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}},
    ]
    assert out["tool_choice"] == {"type": "function", "function": {"name": "now"}}
    for mode in ("auto", "none", "required"):
        built = build_request(request(tools=tools, tool_choice=ir.ToolChoice(mode)), "m", CAPS)
        assert built["tool_choice"] == mode


def test_disable_parallel_becomes_parallel_tool_calls_false() -> None:
    tools = [ir.Tool("f", None, {"type": "object"})]
    out = build_request(request(tools=tools, tool_choice=ir.ToolChoice("auto", disable_parallel=True)), "m", CAPS)
    assert out["parallel_tool_calls"] is False
    out = build_request(request(tools=tools, parallel_tool_calls=True), "m", CAPS)
    assert out["parallel_tool_calls"] is True and "tool_choice" not in out


def test_no_tools_means_no_tool_choice_or_parallel_flag() -> None:
    out = build_request(request(tool_choice=ir.ToolChoice("required"), parallel_tool_calls=False), "m", CAPS)
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & out.keys()


def test_limits_sampling_stop_user_metadata() -> None:
    out = build_request(request(max_tokens=512, temperature=0.2, top_p=0.9, stop=["END"], user="u",
                                metadata={"k": "v"}), "m", CAPS)
    assert (out["max_tokens"], out["temperature"], out["top_p"], out["stop"], out["user"], out["metadata"]) == (
        512, 0.2, 0.9, ["END"], "u", {"k": "v"})


def test_unset_optional_fields_are_absent() -> None:
    out = build_request(request(), "m", CAPS)
    assert set(out) == {"model", "messages", "stream"}


def test_reasoning_effort_from_effort_or_budget() -> None:
    assert build_request(request(reasoning=ir.Reasoning(effort="low")), "m", CAPS)["reasoning_effort"] == "low"
    assert build_request(request(reasoning=ir.Reasoning(budget_tokens=20000)), "m", CAPS)["reasoning_effort"] == "high"
    assert build_request(request(reasoning=ir.Reasoning(budget_tokens=1024)), "m", CAPS)["reasoning_effort"] == "low"
    assert build_request(request(reasoning=ir.Reasoning()), "m", CAPS)["reasoning_effort"] == "medium"


def test_anthropic_max_effort_maps_to_an_openai_effort() -> None:
    assert build_request(request(reasoning=ir.Reasoning(effort="max")), "m", CAPS)["reasoning_effort"] == "xhigh"


def test_reasoning_disabled_or_not_supported_sends_no_effort() -> None:
    assert "reasoning_effort" not in build_request(request(reasoning=ir.Reasoning(enabled=False)), "m", CAPS)
    assert "reasoning_effort" not in build_request(request(reasoning=ir.Reasoning(effort="high")), "m", NO_THINKING)


def test_chat_body_round_trips_through_parse_and_build() -> None:
    client = {
        "model": "alias", "stream": True, "max_completion_tokens": 300, "temperature": 0.3,
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
            {"role": "user", "content": [{"type": "text", "text": "and"},
                                         {"type": "image_url", "image_url": {"url": "https://x/i.png"}}]},
        ],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "tool_choice": "auto",
    }
    out = build_request(parse_request(client), "upstream-model", CAPS)
    assert out["messages"] == client["messages"]
    assert out["tools"] == client["tools"] and out["tool_choice"] == "auto"
    assert out["max_tokens"] == 300 and out["temperature"] == 0.3


# ------------------------------------------------------------ passthrough


def test_passthrough_replaces_model_and_keeps_unknown_fields() -> None:
    body = {"model": "alias", "messages": [{"role": "user", "content": "x"}], "seed": 7,
            "response_format": {"type": "json_object"}, "vendor_extra": {"a": 1}}
    out = passthrough_request(body, "real-model", CAPS)
    assert out == {**body, "model": "real-model"}
    assert body["model"] == "alias"  # the caller's dict is not modified


def test_passthrough_stream_forces_include_usage_without_touching_callers_options() -> None:
    options = {"include_usage": False, "include_obfuscation": False}
    body = {"model": "a", "messages": [], "stream": True, "stream_options": options}
    out = passthrough_request(body, "b", CAPS)
    assert out["stream_options"] == {"include_usage": True, "include_obfuscation": False}
    assert options["include_usage"] is False
    assert passthrough_request({"model": "a", "messages": [], "stream": True}, "b", CAPS)["stream_options"] == {
        "include_usage": True}


def test_passthrough_non_stream_gets_no_stream_options() -> None:
    assert "stream_options" not in passthrough_request({"model": "a", "messages": []}, "b", CAPS)


def test_passthrough_removes_reasoning_fields_when_upstream_cannot_think() -> None:
    body = {"model": "a", "messages": [], "reasoning_effort": "high", "reasoning": {"effort": "high"}}
    assert "reasoning_effort" not in passthrough_request(body, "b", NO_THINKING)
    assert "reasoning" not in passthrough_request(body, "b", NO_THINKING)
    assert passthrough_request(body, "b", CAPS)["reasoning_effort"] == "high"


# ------------------------------------------------------------ system messages, documents, refusals, formats

U = lambda *parts: ir.Message("user", list(parts))  # noqa: E731
A = lambda *parts: ir.Message("assistant", list(parts))  # noqa: E731
T = ir.TextPart


def test_a_mid_conversation_system_message_keeps_its_position() -> None:
    out = build_request(request(U(T("q")), A(T("ok")), ir.Message("system", [T("Be brief.")]), U(T("again"))),
                        "m", CAPS)
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "system", "user"]
    assert out["messages"][2] == {"role": "system", "content": "Be brief."}


def test_a_system_message_between_tool_calls_and_results_moves_after_the_results() -> None:
    call = ir.ToolCallPart("c1", "f", "{}")
    out = build_request(request(U(T("q")), A(call), ir.Message("system", [T("Hurry.")]),
                                U(ir.ToolResultPart("c1", [T("42")]))), "m", CAPS)
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "tool", "system"]
    assert out["messages"][2]["content"] == "42"


def test_documents_become_file_parts_or_text() -> None:
    out = build_request(request(U(T("read"), ir.DocumentPart(data="JVBE", media_type="application/pdf", title="Q3"),
                                  ir.DocumentPart(text="plain words", title="Notes", context="from the wiki"))),
                        "m", CAPS)
    assert out["messages"][0]["content"] == [
        {"type": "text", "text": "read"},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "Q3"}},
        {"type": "text", "text": "Notes\n\nfrom the wiki\n\nplain words"},
    ]


def test_a_text_document_in_a_tool_result_is_its_text_and_a_pdf_is_refused() -> None:
    call = A(ir.ToolCallPart("c1", "f", "{}"))
    out = build_request(request(U(T("q")), call, U(ir.ToolResultPart("c1", [ir.DocumentPart(text="hello")]))),
                        "m", CAPS)
    assert out["messages"][2] == {"role": "tool", "tool_call_id": "c1", "content": "hello"}
    pdf = ir.DocumentPart(data="JVBE", media_type="application/pdf")
    with pytest.raises(ir.InvalidRequest, match="PDF"):
        build_request(request(U(T("q")), call, U(ir.ToolResultPart("c1", [pdf]))), "m", CAPS)


def test_file_ids_document_urls_and_opaque_parts_are_refused_by_name() -> None:
    cases = [
        (ir.DocumentPart(file_id="file_011", param="messages[0].content[0].source.file_id"),
         "messages[0].content[0].source.file_id", "file_011"),
        (ir.DocumentPart(url="https://x/a.pdf", param=None), None, "URL"),
        (ir.OpaquePart("search_result", "anthropic", {"type": "search_result"}, "messages[2].content[0].type"),
         "messages[2].content[0].type", "'search_result'"),
    ]
    for part, param, words in cases:
        with pytest.raises(ir.InvalidRequest) as err:
            build_request(request(U(T("q"), part)), "m", CAPS)
        assert err.value.param == param and words in err.value.message


def test_an_opaque_part_in_an_assistant_or_system_message_is_refused() -> None:
    part = ir.OpaquePart("server_tool_use", "anthropic", {}, "messages[1].content[0].type")
    for message in (A(part), ir.Message("system", [part])):
        with pytest.raises(ir.InvalidRequest) as err:
            build_request(request(U(T("q")), message), "m", CAPS)
        assert err.value.param == "messages[1].content[0].type"


def test_a_refusal_in_history_is_the_assistant_refusal_field() -> None:
    out = build_request(request(U(T("q")), A(ir.RefusalPart("I can't.")), U(T("ok"))), "m", CAPS)
    assert out["messages"][1] == {"role": "assistant", "content": None, "refusal": "I can't."}


def test_response_format_logprobs_and_prompt_cache_key() -> None:
    schema = {"type": "object"}
    out = build_request(request(response_format=ir.ResponseFormat("json_schema", None, schema, True),
                                logprobs=True, top_logprobs=2, prompt_cache_key="k"), "m", CAPS)
    assert out["response_format"] == {"type": "json_schema",
                                      "json_schema": {"name": "response", "schema": schema, "strict": True}}
    assert (out["logprobs"], out["top_logprobs"], out["prompt_cache_key"]) == (True, 2, "k")
    assert build_request(request(response_format=ir.ResponseFormat("json_object")), "m", CAPS)[
        "response_format"] == {"type": "json_object"}
    assert "logprobs" not in build_request(request(top_logprobs=2), "m", CAPS)


def test_web_search_is_dropped_and_recorded() -> None:
    req = request(web_search=ir.WebSearch())
    out = build_request(req, "m", CAPS)
    assert "tools" not in out and "web_search_options" not in out
    assert req.dropped_tools == ["web_search"]
    build_request(req, "m", CAPS)
    assert req.dropped_tools == ["web_search"]  # building twice records it once
