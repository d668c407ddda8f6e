from typing import Any

import pytest

from translation import anthropic, ir


def body(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 1024,
                            "messages": [{"role": "user", "content": "Hello"}]}
    base.update(overrides)
    return base


def user(*blocks: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


# ----------------------------------------------------------------- validation

BAD_BODIES: list[tuple[Any, str | None]] = [
    (None, None),
    ([], None),
    ("a string", None),
    (body(model=None), "model"),
    (body(model=""), "model"),
    (body(model=3), "model"),
    (body(max_tokens=None), "max_tokens"),
    (body(max_tokens=0), "max_tokens"),
    (body(max_tokens=-5), "max_tokens"),
    (body(max_tokens="100"), "max_tokens"),
    (body(max_tokens=True), "max_tokens"),
    (body(max_tokens=10.5), "max_tokens"),
    (body(messages=None), "messages"),
    (body(messages=[]), "messages"),
    (body(messages={"role": "user"}), "messages"),
    (body(messages=["hi"]), "messages[0]"),
    (body(messages=[{"role": "tool", "content": "x"}]), "messages[0].role"),
    (body(messages=[{"role": "system", "content": "x"}, {"role": "user", "content": "y"}]), "messages[0].role"),
    (body(messages=[{"content": "x"}]), "messages[0].role"),
    (body(messages=[{"role": "user", "content": 5}]), "messages[0].content"),
    (body(messages=[{"role": "user"}]), "messages[0].content"),
    (body(messages=[{"role": "user", "content": "a"}, {"role": "assistant", "content": [{"text": "no type"}]}]),
     "messages[1].content[0].type"),
    (body(messages=[user({"type": 7})]), "messages[0].content[0].type"),
    (body(messages=[user("just a string")]), "messages[0].content[0]"),
    (body(messages=[user({"type": "text", "text": 42})]), "messages[0].content[0].text"),
    (body(messages=[user({"type": "text"})]), "messages[0].content[0].text"),
    (body(messages=[user({"type": "image"})]), "messages[0].content[0].source"),
    (body(messages=[user({"type": "image", "source": {"type": "base64", "data": "xx"}})]),
     "messages[0].content[0].source.media_type"),
    (body(messages=[user({"type": "image", "source": {"type": "url"}})]), "messages[0].content[0].source.url"),
    (body(messages=[user({"type": "image", "source": {"type": None}})]), "messages[0].content[0].source.type"),
    (body(messages=[{"role": "user", "content": "x"}, assistant({"type": "tool_use", "name": "f", "input": {}})]),
     "messages[1].content[0].id"),
    (body(messages=[{"role": "user", "content": "x"}, assistant({"type": "tool_use", "id": "t", "input": {}})]),
     "messages[1].content[0].name"),
    (body(messages=[{"role": "user", "content": "x"}, assistant({"type": "tool_use", "id": "t", "name": "f", "input": "{}"})]),
     "messages[1].content[0].input"),
    (body(messages=[user({"type": "tool_use", "id": "t", "name": "f", "input": {}})]),
     "messages[0].content[0].type"),
    (body(messages=[assistant({"type": "tool_result", "tool_use_id": "t"})]), "messages[0].content[0].type"),
    (body(messages=[user({"type": "tool_result"})]), "messages[0].content[0].tool_use_id"),
    (body(messages=[user({"type": "tool_result", "tool_use_id": "t", "content": 3})]),
     "messages[0].content[0].content"),
    (body(messages=[user({"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": 1}]})]),
     "messages[0].content[0].content[0].text"),
    (body(messages=[user({"type": "tool_result", "tool_use_id": "t", "content": [{"text": "x"}]})]),
     "messages[0].content[0].content[0].type"),
    (body(messages=[user({"type": "tool_result", "tool_use_id": "t", "is_error": "yes"})]),
     "messages[0].content[0].is_error"),
    (body(messages=[assistant({"type": "thinking", "thinking": 1})]), "messages[0].content[0].thinking"),
    (body(messages=[assistant({"type": "thinking", "thinking": "t", "signature": 5})]),
     "messages[0].content[0].signature"),
    (body(messages=[assistant({"type": "redacted_thinking"})]), "messages[0].content[0].data"),
    (body(system=5), "system"),
    (body(system=[{"type": "image", "source": {}}]), "system[0].type"),
    (body(system=[{"type": "text", "text": None}]), "system[0].text"),
    (body(system=["plain"]), "system[0]"),
    (body(tools={}), "tools"),
    (body(tools=["x"]), "tools[0]"),
    (body(tools=[{"description": "no name", "input_schema": {}}]), "tools[0].name"),
    (body(tools=[{"name": "f", "input_schema": "object"}]), "tools[0].input_schema"),
    (body(tools=[{"name": "f"}]), "tools[0].input_schema"),
    (body(tools=[{"name": "f", "input_schema": {}, "description": 1}]), "tools[0].description"),
    (body(tools=[{"type": 3, "name": "f"}]), "tools[0].type"),
    (body(tool_choice="auto"), "tool_choice"),
    (body(tool_choice={"type": "required"}), "tool_choice.type"),
    (body(tool_choice={"type": "tool"}), "tool_choice.name"),
    (body(tool_choice={"type": "auto", "disable_parallel_tool_use": "no"}), "tool_choice.disable_parallel_tool_use"),
    (body(thinking="on"), "thinking"),
    (body(thinking={"type": "turbo"}), "thinking.type"),
    (body(thinking={"type": "enabled"}), "thinking.budget_tokens"),
    (body(thinking={"type": "enabled", "budget_tokens": "lots"}), "thinking.budget_tokens"),
    (body(temperature="hot"), "temperature"),
    (body(temperature=True), "temperature"),
    (body(top_p=[1]), "top_p"),
    (body(stop_sequences="###"), "stop_sequences"),
    (body(stop_sequences=["ok", 3]), "stop_sequences[1]"),
    (body(stream="yes"), "stream"),
    (body(metadata="user-1"), "metadata"),
    (body(metadata={"user_id": 12}), "metadata.user_id"),
]


@pytest.mark.parametrize("bad, param", BAD_BODIES)
def test_invalid_body_is_a_400_naming_the_field(bad: Any, param: str | None) -> None:
    with pytest.raises(ir.InvalidRequest) as info:
        anthropic.parse_request(bad)
    assert info.value.param == param
    if param is not None:
        assert info.value.message.startswith(param + ":")


def test_claude_code_extras_are_ignored_never_a_400() -> None:
    req = anthropic.parse_request(body(
        context_management={"edits": [{"type": "clear_tool_uses_20250919"}]},
        output_config={"effort": "high"}, top_k=5, service_tier="auto", container="c_1",
        mcp_servers=[{"type": "url", "url": "https://mcp.example", "name": "x"}],
        anthropic_beta=["something"], unknown_future_field={"a": 1},
    ))
    assert req.model == "claude-sonnet-4-5"
    assert req.reasoning == ir.Reasoning(effort="high")


# ----------------------------------------------------------------- content


def test_minimal_body() -> None:
    req = anthropic.parse_request(body())
    assert req.messages == [ir.Message("user", [ir.TextPart("Hello")])]
    assert req.max_tokens == 1024 and req.stream is False and req.reasoning is None


def test_system_string_and_text_blocks_with_cache_control() -> None:
    assert anthropic.parse_request(body(system="Be brief.")).system == [ir.TextPart("Be brief.")]
    req = anthropic.parse_request(body(system=[
        {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Project rules."},
    ]))
    assert req.system == [ir.TextPart("You are Claude Code."), ir.TextPart("Project rules.")]


def test_images_base64_and_url() -> None:
    req = anthropic.parse_request(body(messages=[user(
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAAA"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
        {"type": "text", "text": "What is this?", "cache_control": {"type": "ephemeral"}},
    )]))
    assert req.messages[0].parts == [
        ir.ImagePart(data="AAAA", media_type="image/jpeg"),
        ir.ImagePart(url="https://example.com/cat.png"),
        ir.TextPart("What is this?"),
    ]


def test_tool_use_and_tool_result_round() -> None:
    req = anthropic.parse_request(body(messages=[
        user({"type": "text", "text": "Weather?"}),
        assistant({"type": "text", "text": "Checking."},
                  {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}),
        user({"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
             {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True,
              "content": [{"type": "text", "text": "failed"},
                          {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QQ"}},
                          {"type": "document", "source": {"type": "text", "data": "x"}}]},
             {"type": "tool_result", "tool_use_id": "toolu_3"}),
    ]))
    call = req.messages[1].parts[1]
    assert call == ir.ToolCallPart(id="toolu_1", name="get_weather", arguments='{"city":"Paris"}')
    results = req.messages[2].parts
    assert results[0] == ir.ToolResultPart("toolu_1", [ir.TextPart("18C")])
    assert results[1] == ir.ToolResultPart(
        "toolu_2", [ir.TextPart("failed"), ir.ImagePart(data="QQ", media_type="image/png"),
                    ir.DocumentPart(text="x", media_type="text/plain")], is_error=True)
    assert results[2] == ir.ToolResultPart("toolu_3", [])


def test_tool_use_without_input_has_empty_arguments_object() -> None:
    req = anthropic.parse_request(body(messages=[{"role": "user", "content": "x"}, assistant({"type": "tool_use", "id": "t", "name": "f"})]))
    assert req.messages[1].parts == [ir.ToolCallPart(id="t", name="f", arguments="{}")]


def test_thinking_and_redacted_thinking_in_assistant_history() -> None:
    req = anthropic.parse_request(body(messages=[
        {"role": "user", "content": "q"},
        assistant({"type": "thinking", "thinking": "hmm", "signature": "sig=="},
                  {"type": "redacted_thinking", "data": "opaque"},
                  {"type": "text", "text": "answer"}),
        {"role": "user", "content": "next"},
    ]))
    assert req.messages[1].parts == [ir.ReasoningPart(text="hmm", signature="sig=="),
                                     ir.ReasoningPart(redacted="opaque"), ir.TextPart("answer")]


def test_blocks_without_an_ir_slot_are_kept_opaque_with_their_path() -> None:
    # search_result, server tool blocks, container uploads, Files-API images: kept for a builder to refuse.
    search = {"type": "search_result", "source": "s", "title": "t", "content": []}
    upload = {"type": "container_upload", "file_id": "f"}
    server = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}}
    image = {"type": "image", "source": {"type": "file", "file_id": "file_1"}}
    req = anthropic.parse_request(body(messages=[
        user(search, upload, {"type": "text", "text": "Summarise"}),
        assistant(server, {"type": "text", "text": "Found it"}),
        user(image, {"type": "bogus"}),
    ]))
    assert req.messages[0].parts == [
        ir.OpaquePart("search_result", "anthropic", search, "messages[0].content[0].type"),
        ir.OpaquePart("container_upload", "anthropic", upload, "messages[0].content[1].type"),
        ir.TextPart("Summarise")]
    assert req.messages[1].parts == [
        ir.OpaquePart("server_tool_use", "anthropic", server, "messages[1].content[0].type"), ir.TextPart("Found it")]
    assert [(p.kind, p.param) for p in req.messages[2].parts if isinstance(p, ir.OpaquePart)] == [
        ("image", "messages[2].content[0].type"), ("bogus", "messages[2].content[1].type")]


def test_a_search_result_inside_a_tool_result_rides_beside_it() -> None:
    inner = {"type": "search_result", "source": "s", "title": "t", "content": []}
    req = anthropic.parse_request(body(messages=[
        user({"type": "text", "text": "q"}), assistant({"type": "tool_use", "id": "t1", "name": "f", "input": {}}),
        user({"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "ok"}, inner]})]))
    assert req.messages[2].parts == [
        ir.ToolResultPart("t1", [ir.TextPart("ok")]),
        ir.OpaquePart("search_result", "anthropic", inner, "messages[2].content[0].content[1].type")]


def test_documents_of_every_source() -> None:
    req = anthropic.parse_request(body(messages=[user(
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"},
         "title": "Q3", "context": "the quarterly report", "citations": {"enabled": True}},
        {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "plain words"}},
        {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": "a"},
                                                                        {"type": "text", "text": "b"}]}},
        {"type": "document", "source": {"type": "file", "file_id": "file_9"}},
    )]))
    assert req.messages[0].parts == [
        ir.DocumentPart(data="JVBE", media_type="application/pdf", title="Q3", context="the quarterly report"),
        ir.DocumentPart(url="https://example.com/a.pdf", media_type="application/pdf"),
        ir.DocumentPart(text="plain words", media_type="text/plain"),
        ir.DocumentPart(text="a\n\nb", media_type="text/plain"),
        ir.DocumentPart(file_id="file_9", param="messages[0].content[4].source.file_id"),
    ]


def test_a_system_message_inside_messages_stays_at_its_position() -> None:
    req = anthropic.parse_request(body(messages=[
        {"role": "user", "content": "q"},
        {"role": "system", "content": "Be terse from now on."},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "again"},
        {"role": "system", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]},
    ]))
    assert [m.role for m in req.messages] == ["user", "system", "assistant", "user", "system"]
    assert req.messages[1].parts == [ir.TextPart("Be terse from now on.")]
    assert req.messages[4].parts == [ir.TextPart("A"), ir.TextPart("B")]
    assert req.system == []


def test_output_config_format_is_the_response_format() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    config = {"effort": "low", "format": {"type": "json_schema", "schema": schema}}
    req = anthropic.parse_request(body(output_config=config))
    assert req.response_format == ir.ResponseFormat(type="json_schema", schema=schema)
    assert req.reasoning == ir.Reasoning(effort="low")
    legacy = anthropic.parse_request(body(output_format={"type": "json_schema", "schema": schema}))
    assert legacy.response_format == ir.ResponseFormat(type="json_schema", schema=schema)


def test_thinking_in_a_user_message_is_dropped() -> None:
    req = anthropic.parse_request(body(messages=[user({"type": "thinking", "thinking": "x", "signature": "s"},
                                                      {"type": "text", "text": "hi"})]))
    assert req.messages[0].parts == [ir.TextPart("hi")]


# ----------------------------------------------------------------- tools and settings


def test_custom_tools_kept_and_server_tools_dropped() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    req = anthropic.parse_request(body(tools=[
        {"name": "get_weather", "description": "Weather", "input_schema": schema, "cache_control": {"type": "ephemeral"}},
        {"type": "custom", "name": "lookup", "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
        {"type": "bash_20250124", "name": "bash"},
        {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
        {"type": "code_execution_20250825", "name": "code_execution"},
        {"type": "computer_20250124", "name": "computer", "display_width_px": 1024, "display_height_px": 768},
        {"type": "mcp_toolset", "mcp_server_name": "github"},
    ]))
    assert req.tools == [ir.Tool("get_weather", "Weather", schema), ir.Tool("lookup", None, {"type": "object"})]
    assert req.web_search == ir.WebSearch(max_uses=5)
    assert req.dropped_tools == ["bash_20250124", "text_editor_20250728",
                                 "code_execution_20250825", "computer_20250124", "mcp_toolset"]


@pytest.mark.parametrize("choice, expected, parallel", [
    ({"type": "auto"}, ir.ToolChoice("auto"), None),
    ({"type": "any"}, ir.ToolChoice("required"), None),
    ({"type": "none"}, ir.ToolChoice("none"), None),
    ({"type": "tool", "name": "get_weather"}, ir.ToolChoice("named", "get_weather"), None),
    ({"type": "auto", "disable_parallel_tool_use": True}, ir.ToolChoice("auto", disable_parallel=True), False),
    ({"type": "any", "disable_parallel_tool_use": False}, ir.ToolChoice("required"), True),
])
def test_tool_choice(choice: dict[str, Any], expected: ir.ToolChoice, parallel: bool | None) -> None:
    req = anthropic.parse_request(body(tool_choice=choice))
    assert req.tool_choice == expected and req.parallel_tool_calls is parallel


@pytest.mark.parametrize("thinking, output_config, expected", [
    ({"type": "enabled", "budget_tokens": 16000}, None, ir.Reasoning(budget_tokens=16000)),
    ({"type": "disabled"}, None, ir.Reasoning(enabled=False)),
    ({"type": "adaptive"}, None, ir.Reasoning(effort=None)),
    ({"type": "adaptive"}, {"effort": "low"}, ir.Reasoning(effort="low")),
    (None, {"effort": "max"}, ir.Reasoning(effort="max")),
    ({"type": "enabled", "budget_tokens": 2048}, {"effort": "medium"}, ir.Reasoning(effort="medium", budget_tokens=2048)),
    (None, None, None),
])
def test_thinking_settings(thinking: Any, output_config: Any, expected: ir.Reasoning | None) -> None:
    extra: dict[str, Any] = {}
    if thinking is not None:
        extra["thinking"] = thinking
    if output_config is not None:
        extra["output_config"] = output_config
    assert anthropic.parse_request(body(**extra)).reasoning == expected


def test_sampling_stop_user_and_stream() -> None:
    req = anthropic.parse_request(body(temperature=0, top_p=0.9, stop_sequences=["###", "END"],
                                       metadata={"user_id": "user-42"}, stream=True))
    assert (req.temperature, req.top_p, req.stop, req.user, req.stream) == (0.0, 0.9, ["###", "END"], "user-42", True)


def test_null_optional_fields_are_absent() -> None:
    req = anthropic.parse_request(body(system=None, tools=None, tool_choice=None, thinking=None,
                                       temperature=None, stop_sequences=None, metadata=None, stream=None))
    assert req.system == [] and req.tools == [] and req.tool_choice is None and req.user is None
