"""parse_request: client Chat Completions body → ir.Request."""

from typing import Any

import pytest

from translation import anthropic, ir, openai_chat, responses
from translation.openai_chat import parse_request

USER = {"role": "user", "content": "hi"}


def body(**fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"model": "gpt-x", "messages": [USER]}
    out.update(fields)
    return out


def msgs(*messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return body(messages=list(messages), **fields)


# ------------------------------------------------------------ validation

BAD_BODIES: list[tuple[Any, str | None]] = [
    (None, None),
    ([USER], None),
    ("hello", None),
    ({"messages": [USER]}, "model"),
    (body(model=""), "model"),
    (body(model=3), "model"),
    (body(messages=[]), "messages"),
    (body(messages="hi"), "messages"),
    (body(messages=None), "messages"),
    (body(messages=["hi"]), "messages[0]"),
    (msgs({"content": "x"}), "messages[0].role"),
    (msgs({"role": "robot", "content": "x"}), "messages[0].role"),
    (msgs({"role": 1, "content": "x"}), "messages[0].role"),
    (msgs(USER, {"role": "user", "content": None}), "messages[1].content"),
    (msgs({"role": "user", "content": 5}), "messages[0].content"),
    (msgs({"role": "user", "content": [{"text": "no type"}]}), "messages[0].content[0].type"),
    (msgs({"role": "user", "content": ["bare string"]}), "messages[0].content[0]"),
    (msgs({"role": "user", "content": [{"type": "text", "text": 3}]}), "messages[0].content[0].text"),
    (msgs({"role": "user", "content": [{"type": "image_url", "image_url": {}}]}),
     "messages[0].content[0].image_url.url"),
    (msgs({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x/y.png"}}]}),
     "messages[0].content[0].image_url.url"),
    (msgs({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png,abc"}}]}),
     "messages[0].content[0].image_url.url"),
    (msgs({"role": "system", "content": None}, USER), "messages[0].content"),
    (msgs(USER, {"role": "assistant", "content": 7}), "messages[1].content"),
    (msgs(USER, {"role": "assistant", "content": None, "tool_calls": {}}), "messages[1].tool_calls"),
    (msgs(USER, {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f",
                                                                                        "arguments": "{}"}}]}),
     "messages[1].tool_calls[0].id"),
    (msgs(USER, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                      "function": {"arguments": "{}"}}]}),
     "messages[1].tool_calls[0].function.name"),
    (msgs(USER, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                      "function": {"name": "f", "arguments": {"a": 1}}}]}),
     "messages[1].tool_calls[0].function.arguments"),
    (msgs(USER, {"role": "assistant", "tool_calls": [{"id": "c", "type": "custom", "custom": {}}]}),
     "messages[1].tool_calls[0].type"),
    (msgs(USER, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function"}]}),
     "messages[1].tool_calls[0].function"),
    (msgs(USER, {"role": "tool", "content": "x"}), "messages[1].tool_call_id"),
    (msgs(USER, {"role": "tool", "tool_call_id": "c", "content": None}), "messages[1].content"),
    (msgs(USER, {"role": "function", "content": "x"}), "messages[1].name"),
    (body(tools={}), "tools"),
    (body(tools=["f"]), "tools[0]"),
    (body(tools=[{"function": {"name": "f"}}]), "tools[0].type"),
    (body(tools=[{"type": "function"}]), "tools[0].function"),
    (body(tools=[{"type": "function", "function": {"description": "d"}}]), "tools[0].function.name"),
    (body(tools=[{"type": "function", "function": {"name": "f", "parameters": "{}"}}]),
     "tools[0].function.parameters"),
    (body(tools=[{"type": "function", "function": {"name": "f", "description": 3}}]),
     "tools[0].function.description"),
    (body(tool_choice="any"), "tool_choice"),
    (body(tool_choice={"type": "function"}), "tool_choice.function"),
    (body(tool_choice={"type": "function", "function": {}}), "tool_choice.function.name"),
    (body(tool_choice={"type": "tool", "name": "f"}), "tool_choice.type"),
    (body(tool_choice=3), "tool_choice"),
    (body(parallel_tool_calls="yes"), "parallel_tool_calls"),
    (body(max_tokens="100"), "max_tokens"),
    (body(max_tokens=True), "max_tokens"),
    (body(max_tokens=0), "max_tokens"),
    (body(max_tokens=1.5), "max_tokens"),
    (body(max_completion_tokens=-1), "max_completion_tokens"),
    (body(temperature="0.5"), "temperature"),
    (body(temperature=False), "temperature"),
    (body(top_p=[1]), "top_p"),
    (body(stop=3), "stop"),
    (body(stop=["a", 1]), "stop"),
    (body(reasoning_effort=2), "reasoning_effort"),
    (body(reasoning="high"), "reasoning"),
    (body(reasoning={"effort": 1}), "reasoning.effort"),
    (body(reasoning={"max_tokens": "a lot"}), "reasoning.max_tokens"),
    (body(stream="true"), "stream"),
    (body(user=42), "user"),
    (body(metadata=[]), "metadata"),
    (body(metadata={"k": 1}), "metadata.k"),
    (body(n=0), "n"),
    (body(n="1"), "n"),
    (body(functions=[{"description": "no name"}]), "functions[0].name"),
]


@pytest.mark.parametrize(("bad", "param"), BAD_BODIES)
def test_invalid_body_is_rejected_naming_the_field(bad: Any, param: str | None) -> None:
    with pytest.raises(ir.InvalidRequest) as info:
        parse_request(bad)
    assert info.value.param == param
    if param is not None:
        assert info.value.message.startswith(param + ":")


def test_several_choices_are_accepted_for_a_chat_upstream_and_refused_by_the_others() -> None:
    req = parse_request(body(n=3))
    assert req.choices == 3
    assert openai_chat.passthrough_request(body(n=3), "m", ir.UpstreamCaps())["n"] == 3
    for other in (anthropic, responses):
        with pytest.raises(ir.InvalidRequest, match="n=3") as info:
            other.build_request(req, "m", ir.UpstreamCaps())
        assert info.value.param == "n"


def test_unknown_role_message_names_the_role() -> None:
    with pytest.raises(ir.InvalidRequest, match="'robot'"):
        parse_request(msgs({"role": "robot", "content": "x"}))


# ------------------------------------------------------------ accepted bodies


def test_minimal_body() -> None:
    req = parse_request(body())
    assert req.model == "gpt-x"
    assert req.messages == [ir.Message("user", [ir.TextPart("hi")])]
    assert req.stream is False and req.max_tokens is None and req.tools == []


def test_system_and_developer_messages_become_system_parts() -> None:
    req = parse_request(msgs({"role": "system", "content": "Be brief."},
                             {"role": "developer", "content": [{"type": "text", "text": "Use French."}]},
                             USER))
    assert req.system == [ir.TextPart("Be brief."), ir.TextPart("Use French.")]
    assert [m.role for m in req.messages] == ["user"]


def test_user_parts_text_and_images() -> None:
    req = parse_request(msgs({"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "high"}},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}},
    ]}))
    assert req.messages[0].parts == [
        ir.TextPart("What is this?"),
        ir.ImagePart(url="https://example.com/cat.png", detail="high"),
        ir.ImagePart(data="/9j/4AAQ", media_type="image/jpeg"),
    ]


def test_image_url_given_as_a_bare_string_is_accepted() -> None:
    req = parse_request(msgs({"role": "user", "content": [{"type": "image_url", "image_url": "https://x/y.png"}]}))
    assert req.messages[0].parts == [ir.ImagePart(url="https://x/y.png")]


def test_audio_and_unknown_parts_are_kept_opaque_and_files_are_documents() -> None:
    audio = {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
    req = parse_request(msgs({"role": "user", "content": [
        {"type": "text", "text": "listen"}, audio,
        {"type": "file", "file": {"file_id": "file-1"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"}},
        {"type": "video", "url": "x"},
    ]}))
    assert req.messages[0].parts == [
        ir.TextPart("listen"),
        ir.OpaquePart("input_audio", "openai_chat", audio, "messages[0].content[1].type"),
        ir.DocumentPart(file_id="file-1", param="messages[0].content[2].file.file_id"),
        ir.DocumentPart(data="JVBE", media_type="application/pdf", filename="a.pdf"),
        ir.OpaquePart("video", "openai_chat", {"type": "video", "url": "x"}, "messages[0].content[4].type"),
    ]


def test_unknown_parts_in_system_assistant_and_tool_messages_are_kept_opaque() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://x"}}
    req = parse_request(msgs(
        {"role": "system", "content": [image]}, USER,
        {"role": "assistant", "content": [{"type": "bogus"}], "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "ok"}, image]}))
    assert req.system == [] and req.messages[0] == ir.Message("system", [
        ir.OpaquePart("image_url", "openai_chat", image, "messages[0].content[0].type")])
    assert isinstance(req.messages[2].parts[0], ir.OpaquePart)
    assert req.messages[3].parts == [
        ir.ToolResultPart("c", [ir.TextPart("ok")]),
        ir.OpaquePart("image_url", "openai_chat", image, "messages[3].content[1].type")]


def test_system_and_developer_messages_after_the_conversation_starts_stay_in_place() -> None:
    req = parse_request(msgs(
        {"role": "system", "content": "S1"}, {"role": "developer", "content": "S2"}, USER,
        {"role": "assistant", "content": "ok"}, {"role": "developer", "content": "Now be brief."},
        {"role": "user", "content": "again"}))
    assert [p.text for p in req.system] == ["S1", "S2"]
    assert [m.role for m in req.messages] == ["user", "assistant", "system", "user"]
    assert req.messages[2].parts == [ir.TextPart("Now be brief.")]


def test_a_system_message_after_tool_results_does_not_join_them() -> None:
    req = parse_request(msgs(USER, {"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "42"}, {"role": "system", "content": "Hurry."},
        {"role": "user", "content": "next"}))
    assert [m.role for m in req.messages] == ["user", "assistant", "user", "system", "user"]


def test_structured_output_logprobs_and_cache_key() -> None:
    schema = {"type": "object", "properties": {}}
    req = parse_request(msgs(USER, response_format={"type": "json_schema", "json_schema": {
        "name": "answer", "schema": schema, "strict": True, "description": "d"}},
        logprobs=True, top_logprobs=0, prompt_cache_key="k1"))
    assert req.response_format == ir.ResponseFormat("json_schema", "answer", schema, True, "d")
    assert (req.logprobs, req.top_logprobs, req.prompt_cache_key) == (True, 0, "k1")
    assert parse_request(msgs(USER, response_format={"type": "json_object"})).response_format == \
        ir.ResponseFormat("json_object")
    with pytest.raises(ir.InvalidRequest) as err:
        parse_request(msgs(USER, response_format={"type": "xml"}))
    assert err.value.param == "response_format.type"


def test_assistant_with_reasoning_text_and_tool_calls() -> None:
    req = parse_request(msgs(USER, {
        "role": "assistant", "content": "Let me check.", "reasoning_content": "The user wants weather.",
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}],
    }))
    assert req.messages[1] == ir.Message("assistant", [
        ir.ReasoningPart(text="The user wants weather."),
        ir.TextPart("Let me check."),
        ir.ToolCallPart(id="call_1", name="get_weather", arguments="{\"city\":\"Paris\"}"),
    ])
    assert req.messages[1].parts[0].signature is None  # type: ignore[union-attr]


def test_assistant_null_content_with_tool_calls_only() -> None:
    req = parse_request(msgs(USER, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": ""}}]}))
    assert req.messages[1].parts == [ir.ToolCallPart("a", "f", "")]


def test_assistant_text_and_refusal_parts() -> None:
    req = parse_request(msgs(USER, {"role": "assistant", "content": [
        {"type": "text", "text": "Hello"}, {"type": "refusal", "refusal": "I can't."}]}))
    assert req.messages[1].parts == [ir.TextPart("Hello"), ir.RefusalPart("I can't.")]
    req = parse_request(msgs(USER, {"role": "assistant", "content": None, "refusal": "No."}))
    assert req.messages[1].parts == [ir.RefusalPart("No.")]


def test_empty_assistant_message_is_skipped() -> None:
    req = parse_request(msgs(USER, {"role": "assistant", "content": None}, {"role": "user", "content": "again"}))
    assert [m.role for m in req.messages] == ["user", "user"]


def test_tool_messages_and_following_user_message_merge_into_one_user_message() -> None:
    req = parse_request(msgs(
        USER,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "b", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "20"},
                                                           {"type": "text", "text": "C"}]},
        {"role": "user", "content": "thanks, and tomorrow?"},
        {"role": "assistant", "content": "Tomorrow rain."},
    ))
    assert [m.role for m in req.messages] == ["user", "assistant", "user", "assistant"]
    merged = req.messages[2].parts
    assert merged == [
        ir.ToolResultPart("c1", [ir.TextPart("sunny")]),
        ir.ToolResultPart("c2", [ir.TextPart("20"), ir.TextPart("C")]),
        ir.TextPart("thanks, and tomorrow?"),
    ]


def test_second_user_message_after_the_merged_one_stays_separate() -> None:
    req = parse_request(msgs(
        USER, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                   "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "r"},
        {"role": "user", "content": "one"}, {"role": "user", "content": "two"}))
    assert [m.role for m in req.messages] == ["user", "assistant", "user", "user"]


def test_legacy_function_role_and_function_call() -> None:
    req = parse_request(msgs(
        USER,
        {"role": "assistant", "content": None, "function_call": {"name": "lookup", "arguments": "{\"q\":1}"}},
        {"role": "function", "name": "lookup", "content": "found"},
    ))
    assert req.messages[1].parts == [ir.ToolCallPart("lookup", "lookup", "{\"q\":1}")]
    assert req.messages[2].parts == [ir.ToolResultPart("lookup", [ir.TextPart("found")])]


def test_function_tools_and_dropped_tool_types() -> None:
    req = parse_request(body(tools=[
        {"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                          "parameters": {"type": "object", "properties": {"c": {"type": "string"}}},
                                          "strict": True}},
        {"type": "function", "function": {"name": "now"}},
        {"type": "custom", "custom": {"name": "grammar_tool"}},
        {"type": "web_search"},
    ]))
    assert req.tools == [
        ir.Tool("get_weather", "Weather", {"type": "object", "properties": {"c": {"type": "string"}}}),
        ir.Tool("now", None, {"type": "object", "properties": {}}),
    ]
    assert req.dropped_tools == ["custom", "web_search"]


def test_legacy_functions_are_tools() -> None:
    req = parse_request(body(functions=[{"name": "f", "parameters": {"type": "object"}}], function_call="auto"))
    assert req.tools == [ir.Tool("f", None, {"type": "object"})]
    assert req.tool_choice == ir.ToolChoice("auto")


@pytest.mark.parametrize(("value", "expected"), [
    ("auto", ir.ToolChoice("auto")),
    ("none", ir.ToolChoice("none")),
    ("required", ir.ToolChoice("required")),
    ({"type": "function", "function": {"name": "f"}}, ir.ToolChoice("named", name="f")),
    ({"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": []}}, ir.ToolChoice("required")),
])
def test_tool_choice_values(value: Any, expected: ir.ToolChoice) -> None:
    assert parse_request(body(tool_choice=value)).tool_choice == expected


def test_parallel_tool_calls_false_disables_parallel_on_the_choice() -> None:
    req = parse_request(body(tool_choice="auto", parallel_tool_calls=False))
    assert req.parallel_tool_calls is False
    assert req.tool_choice == ir.ToolChoice("auto", disable_parallel=True)


def test_max_completion_tokens_is_preferred_over_max_tokens() -> None:
    assert parse_request(body(max_tokens=100, max_completion_tokens=200)).max_tokens == 200
    assert parse_request(body(max_tokens=100)).max_tokens == 100


def test_sampling_stop_stream_user_metadata() -> None:
    req = parse_request(body(temperature=0, top_p=0.5, stop="END", stream=True, user="u-1",
                             metadata={"trace": "t1"}))
    assert (req.temperature, req.top_p, req.stop, req.stream, req.user, req.metadata) == (
        0.0, 0.5, ["END"], True, "u-1", {"trace": "t1"})
    assert parse_request(body(stop=["a", "b"])).stop == ["a", "b"]


@pytest.mark.parametrize(("fields", "expected"), [
    ({"reasoning_effort": "high"}, ir.Reasoning(effort="high")),
    ({"reasoning_effort": "minimal"}, ir.Reasoning(effort="minimal")),
    ({"reasoning_effort": "none"}, ir.Reasoning(enabled=False)),
    ({"reasoning": {"effort": "low"}}, ir.Reasoning(effort="low")),
    ({"reasoning": {"max_tokens": 4000}}, ir.Reasoning(budget_tokens=4000)),
    ({"reasoning": {"enabled": False}}, ir.Reasoning(enabled=False)),
    ({"reasoning_effort": "low", "reasoning": {"effort": "high"}}, ir.Reasoning(effort="low")),
    ({}, None),
])
def test_reasoning_effort(fields: dict[str, Any], expected: ir.Reasoning | None) -> None:
    assert parse_request(body(**fields)).reasoning == expected


def test_fields_the_ir_does_not_model_are_ignored() -> None:
    req = parse_request(body(
        stream_options={"include_usage": True}, response_format={"type": "json_object"}, seed=1,
        logprobs=True, top_logprobs=2, frequency_penalty=0.1, presence_penalty=0.1, logit_bias={"1": 2},
        service_tier="auto", store=False, prompt_cache_key="k", verbosity="low", modalities=["text"],
        n=1, some_vendor_extra={"x": 1},
    ))
    assert req.model == "gpt-x"


def test_message_name_field_and_extras_are_ignored() -> None:
    req = parse_request(msgs({"role": "user", "name": "alice", "content": "hi", "cache_control": {}}))
    assert req.messages[0].parts == [ir.TextPart("hi")]
