import copy
from typing import Any

import pytest

from translation import anthropic, ir, reasoning, repair

CAPS = ir.UpstreamCaps()
NO_THINKING = ir.UpstreamCaps(thinking=False)
NO_CACHE = ir.UpstreamCaps(cache_control=False)


def req(*messages: ir.Message, **kw: Any) -> ir.Request:
    return ir.Request(model="client-model", messages=list(messages), **kw)


def U(*parts: ir.Part) -> ir.Message:
    return ir.Message("user", list(parts))


def A(*parts: ir.Part) -> ir.Message:
    return ir.Message("assistant", list(parts))


def T(text: str) -> ir.TextPart:
    return ir.TextPart(text)


def build(r: ir.Request, caps: ir.UpstreamCaps = CAPS) -> dict[str, Any]:
    return anthropic.build_request(r, "claude-upstream", caps)


# ----------------------------------------------------------------- build_request


def test_minimal_request_uses_resolved_model_default_max_tokens_and_stream_flag() -> None:
    assert build(req(U(T("hi")))) == {
        "model": "claude-upstream", "max_tokens": 4096,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "stream": False,
    }
    assert build(req(U(T("hi")), max_tokens=300, stream=True))["max_tokens"] == 300
    assert build(req(U(T("hi")), stream=True))["stream"] is True


def test_system_one_part_is_a_string_several_are_blocks() -> None:
    assert build(req(U(T("hi")), system=[T("Be brief.")]))["system"] == "Be brief."
    assert build(req(U(T("hi")), system=[T("A"), T("B")]))["system"] == [
        {"type": "text", "text": "A"}, {"type": "text", "text": "B"}]
    assert "system" not in build(req(U(T("hi"))))


def test_consecutive_same_role_messages_merge() -> None:
    body = build(req(U(T("a")), U(T("b")), A(T("c")), A(T("d")), U(T("e"))))
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][0]["content"] == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]


def test_tool_results_come_first_in_a_user_message() -> None:
    call = ir.ToolCallPart("toolu_1", "f", '{"x": 1}')
    body = build(req(U(T("q")), A(call), U(T("and also this"), ir.ToolResultPart("toolu_1", [T("42")]))))
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"},
        {"type": "text", "text": "and also this"},
    ]


def test_tool_result_content_shapes_and_is_error() -> None:
    results = [
        ir.ToolResultPart("a", [T("one")]),
        ir.ToolResultPart("b", [T("x"), ir.ImagePart(data="QQ", media_type="image/png")], is_error=True),
        ir.ToolResultPart("c", []),
    ]
    calls = [ir.ToolCallPart(i, "f", "{}") for i in "abc"]
    content = build(req(U(T("q")), A(*calls), U(*results)))["messages"][2]["content"]
    assert content == [
        {"type": "tool_result", "tool_use_id": "a", "content": "one"},
        {"type": "tool_result", "tool_use_id": "b", "is_error": True, "content": [
            {"type": "text", "text": "x"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QQ"}}]},
        {"type": "tool_result", "tool_use_id": "c"},
    ]


def test_images_base64_url_and_data_url() -> None:
    content = build(req(U(
        ir.ImagePart(data="AAAA", media_type="image/jpeg"),
        ir.ImagePart(url="https://example.com/cat.png"),
        ir.ImagePart(url="data:image/webp;base64,UklGRg=="),
        ir.ImagePart(url="data:image/svg+xml,%3Csvg%2F%3E"),
    )))["messages"][0]["content"]
    assert [c["source"] for c in content] == [
        {"type": "base64", "media_type": "image/jpeg", "data": "AAAA"},
        {"type": "url", "url": "https://example.com/cat.png"},
        {"type": "base64", "media_type": "image/webp", "data": "UklGRg=="},
        {"type": "base64", "media_type": "image/svg+xml", "data": "PHN2Zy8+"},
    ]


def test_assistant_order_is_thinking_text_tool_use() -> None:
    body = build(req(U(T("q")), A(ir.ToolCallPart("t1", "f", '{"a": 1}'), T("Let me check."),
                                  ir.ReasoningPart(text="think", signature="sig"))))
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "think", "signature": "sig"},
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
    ]


def test_unsigned_reasoning_is_dropped_on_purpose() -> None:
    # Anthropic rejects a thinking block without a valid signature (e.g. DeepSeek reasoning_content).
    body = build(req(U(T("q")), A(ir.ReasoningPart(text="unsigned thoughts"), T("answer"))))
    assert body["messages"][1]["content"] == [{"type": "text", "text": "answer"}]


def test_redacted_reasoning_becomes_redacted_thinking() -> None:
    body = build(req(U(T("q")), A(ir.ReasoningPart(redacted="opaque"), T("answer"))))
    assert body["messages"][1]["content"][0] == {"type": "redacted_thinking", "data": "opaque"}


def test_reasoning_dropped_when_upstream_cannot_think() -> None:
    r = req(U(T("q")), A(ir.ReasoningPart(text="t", signature="s"), ir.ReasoningPart(redacted="r"), T("a")),
            reasoning=ir.Reasoning(effort="high"))
    body = build(r, NO_THINKING)
    assert body["messages"][1]["content"] == [{"type": "text", "text": "a"}]
    assert "thinking" not in body


def test_assistant_turn_left_empty_is_skipped_and_neighbours_merge() -> None:
    body = build(req(U(T("a")), A(ir.ReasoningPart(text="unsigned")), U(T("b"))))
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]


def test_empty_text_parts_are_not_sent() -> None:
    body = build(req(U(T(""), T("x")), A(T(""), ir.ToolCallPart("t", "f", "{}")), U(ir.ToolResultPart("t", [T("r")]))))
    assert body["messages"][0]["content"] == [{"type": "text", "text": "x"}]
    assert body["messages"][1]["content"] == [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]


def test_unparsable_or_non_object_arguments_become_empty_input() -> None:
    calls = [ir.ToolCallPart("a", "f", ""), ir.ToolCallPart("b", "f", '{"broken'), ir.ToolCallPart("c", "f", "[1, 2]")]
    results = [ir.ToolResultPart(i, [T("ok")]) for i in "abc"]
    content = build(req(U(T("q")), A(*calls), U(*results)))["messages"][1]["content"]
    assert [c["input"] for c in content] == [{}, {}, {}]


def test_orphan_tool_calls_get_a_synthetic_error_result() -> None:
    body = build(req(U(T("q")), A(ir.ToolCallPart("t1", "f", "{}"), ir.ToolCallPart("t2", "g", "{}")),
                     U(ir.ToolResultPart("t1", [T("done")]), T("continue"))))
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t2", "content": repair.ORPHAN_RESULT_TEXT, "is_error": True},
        {"type": "tool_result", "tool_use_id": "t1", "content": "done"},
        {"type": "text", "text": "continue"},
    ]


def test_tools_and_tool_choice_table() -> None:
    tools = [ir.Tool("get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}}),
             ir.Tool("noop", None, {})]
    body = build(req(U(T("q")), tools=tools, tool_choice=ir.ToolChoice("required")))
    assert body["tools"] == [
        {"name": "get_weather", "description": "Weather",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
        {"name": "noop", "input_schema": {"type": "object", "properties": {}}},
    ]
    assert body["tool_choice"] == {"type": "any"}
    for choice, wire in [(ir.ToolChoice("auto"), {"type": "auto"}), (ir.ToolChoice("none"), {"type": "none"}),
                         (ir.ToolChoice("named", "noop"), {"type": "tool", "name": "noop"})]:
        assert build(req(U(T("q")), tools=tools, tool_choice=choice))["tool_choice"] == wire


def test_disable_parallel_tool_use_from_either_source() -> None:
    tools = [ir.Tool("f", None, {"type": "object"})]
    body = build(req(U(T("q")), tools=tools, tool_choice=ir.ToolChoice("auto", disable_parallel=True)))
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    body = build(req(U(T("q")), tools=tools, tool_choice=ir.ToolChoice("named", "f"), parallel_tool_calls=False))
    assert body["tool_choice"] == {"type": "tool", "name": "f", "disable_parallel_tool_use": True}
    body = build(req(U(T("q")), tools=tools, parallel_tool_calls=False))
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    body = build(req(U(T("q")), tools=tools, tool_choice=ir.ToolChoice("none"), parallel_tool_calls=False))
    assert body["tool_choice"] == {"type": "none"}


def test_no_tool_choice_without_tools() -> None:
    body = build(req(U(T("q")), tool_choice=ir.ToolChoice("required")))
    assert "tool_choice" not in body and "tools" not in body


def test_a_token_budget_stays_enabled_thinking_with_the_minimum() -> None:
    assert build(req(U(T("q")), reasoning=ir.Reasoning(budget_tokens=5000), max_tokens=20000))["thinking"] == {
        "type": "enabled", "budget_tokens": 5000}
    assert build(req(U(T("q")), reasoning=ir.Reasoning(budget_tokens=100)))["thinking"]["budget_tokens"] == 1024
    assert "output_config" not in build(req(U(T("q")), reasoning=ir.Reasoning(budget_tokens=5000)))


def test_an_effort_becomes_adaptive_thinking_with_output_config_effort() -> None:
    body = build(req(U(T("q")), reasoning=ir.Reasoning(effort="high")))
    assert body["thinking"] == {"type": "adaptive"} and body["output_config"] == {"effort": "high"}
    # No max_tokens from the client: room for the thinking an effort implies, as OpenAI's defaults give.
    assert body["max_tokens"] == reasoning.effort_to_budget("high") + 4096
    assert build(req(U(T("q")), reasoning=ir.Reasoning(effort="high"), max_tokens=2000))["max_tokens"] == 2000
    # OpenAI's "minimal" is below Anthropic's lowest level; "xhigh" and "max" exist on both or Anthropic.
    assert build(req(U(T("q")), reasoning=ir.Reasoning(effort="minimal")))["output_config"] == {"effort": "low"}
    assert build(req(U(T("q")), reasoning=ir.Reasoning(effort="xhigh")))["output_config"] == {"effort": "xhigh"}
    # Reasoning asked without an effort (Codex's {"summary": "auto"}): the model decides.
    body = build(req(U(T("q")), reasoning=ir.Reasoning()))
    assert body["thinking"] == {"type": "adaptive"} and "output_config" not in body


def test_a_forced_tool_drops_thinking_but_keeps_the_effort() -> None:
    tool = ir.Tool("f", None, {"type": "object"})
    body = build(req(U(T("q")), tools=[tool], tool_choice=ir.ToolChoice("named", name="f"),
                     reasoning=ir.Reasoning(effort="low")))
    assert "thinking" not in body and body["output_config"] == {"effort": "low"}


def test_no_thinking_fields_for_an_upstream_without_thinking() -> None:
    body = build(req(U(T("q")), reasoning=ir.Reasoning(effort="high")), NO_THINKING)
    assert "thinking" not in body and "output_config" not in body


def test_max_tokens_raised_above_the_thinking_budget() -> None:
    body = build(req(U(T("q")), reasoning=ir.Reasoning(budget_tokens=8000), max_tokens=8000))
    assert body["max_tokens"] == 8000 + 4096
    body = build(req(U(T("q")), reasoning=ir.Reasoning(budget_tokens=8000), max_tokens=9000))
    assert body["max_tokens"] == 9000


def test_thinking_drops_temperature_and_top_p_on_purpose() -> None:
    # The Messages API rejects temperature/top_p changes while thinking is on.
    body = build(req(U(T("q")), reasoning=ir.Reasoning(effort="low"), temperature=0.2, top_p=0.5))
    assert "temperature" not in body and "top_p" not in body
    body = build(req(U(T("q")), temperature=0.2, top_p=0.5))
    assert (body["temperature"], body["top_p"]) == (0.2, 0.5)


def test_disabled_reasoning_sends_no_thinking() -> None:
    assert "thinking" not in build(req(U(T("q")), reasoning=ir.Reasoning(enabled=False)))


def test_stop_and_user() -> None:
    body = build(req(U(T("q")), stop=["###"], user="u-1"))
    assert body["stop_sequences"] == ["###"] and body["metadata"] == {"user_id": "u-1"}


def test_parse_then_build_keeps_a_claude_code_conversation() -> None:
    client: dict[str, Any] = {
        "model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": True,
        "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
        "thinking": {"type": "enabled", "budget_tokens": 10000},
        "tools": [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "read a.txt"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "I will read it.", "signature": "sig1"},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a.txt"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello"}]},
        ],
    }
    body = anthropic.build_request(anthropic.parse_request(client), "claude-upstream", CAPS)
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "read a.txt"}]},
        {"role": "assistant", "content": client["messages"][1]["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello"}]},
    ]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 10000} and body["max_tokens"] == 32000
    assert body["system"] == "You are Claude Code."


# ----------------------------------------------------------------- passthrough_request

CLIENT_BODY: dict[str, Any] = {
    "model": "client-alias", "max_tokens": 1000, "stream": True,
    "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
    "thinking": {"type": "enabled", "budget_tokens": 2000},
    "output_config": {"effort": "high"},
    "context_management": {"edits": []},
    "tools": [{"name": "f", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "t", "signature": "s"},
            {"type": "redacted_thinking", "data": "r"},
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "cache_control": {"type": "ephemeral"},
             "content": [{"type": "text", "text": "r", "cache_control": {"type": "ephemeral"}}]}]},
    ],
}


def test_passthrough_replaces_model_and_keeps_everything_else() -> None:
    original = copy.deepcopy(CLIENT_BODY)
    out = anthropic.passthrough_request(CLIENT_BODY, "claude-upstream", CAPS)
    assert out["model"] == "claude-upstream"
    assert {k: v for k, v in out.items() if k != "model"} == {k: v for k, v in original.items() if k != "model"}
    assert CLIENT_BODY == original


def test_passthrough_strips_cache_control_everywhere_without_mutating_the_caller() -> None:
    original = copy.deepcopy(CLIENT_BODY)
    out = anthropic.passthrough_request(CLIENT_BODY, "claude-upstream", NO_CACHE)
    assert "cache_control" not in str(out)
    assert out["messages"][2]["content"][0]["content"] == [{"type": "text", "text": "r"}]
    assert out["thinking"] == original["thinking"]
    assert CLIENT_BODY == original


def test_passthrough_without_thinking_drops_thinking_field_and_blocks_only() -> None:
    original = copy.deepcopy(CLIENT_BODY)
    out = anthropic.passthrough_request(CLIENT_BODY, "claude-upstream", NO_THINKING)
    assert "thinking" not in out
    assert out["output_config"] == {"effort": "high"}  # only `thinking` goes
    assert out["messages"][1]["content"] == [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]
    assert out["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert CLIENT_BODY == original


def test_passthrough_completes_orphaned_tool_use_at_start_of_next_user_message() -> None:
    body = {"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}},
                                          {"type": "tool_use", "id": "b", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok"},
                                     {"type": "text", "text": "next"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {}}]},
        {"role": "user", "content": "string content"},
    ]}
    original = copy.deepcopy(body)
    out = anthropic.passthrough_request(body, "m2", CAPS)
    synthetic = {"type": "tool_result", "content": repair.ORPHAN_RESULT_TEXT, "is_error": True}
    assert out["messages"][2]["content"] == [{**synthetic, "tool_use_id": "b"},
                                             {"type": "tool_result", "tool_use_id": "a", "content": "ok"},
                                             {"type": "text", "text": "next"}]
    assert out["messages"][4]["content"] == [{**synthetic, "tool_use_id": "c"},
                                             {"type": "text", "text": "string content"}]
    assert body == original


def test_passthrough_orphan_followed_by_assistant_gets_a_user_turn_and_trailing_prefill_is_left() -> None:
    body: dict[str, Any] = {"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]},
        {"role": "assistant", "content": "more"},
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "z", "name": "f", "input": {}}]},
    ]}
    out = anthropic.passthrough_request(body, "m2", CAPS)
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert out["messages"][2]["content"][0]["tool_use_id"] == "a"
    assert out["messages"][-1] == body["messages"][-1]


def test_passthrough_tolerates_odd_shapes() -> None:
    body = {"model": "m", "messages": [None, {"role": "assistant", "content": None}], "system": "s", "tools": None}
    out = anthropic.passthrough_request(body, "m2", ir.UpstreamCaps(thinking=False, cache_control=False))
    assert out["messages"] == body["messages"] and out["system"] == "s" and out["model"] == "m2"


def test_forced_tool_choice_wins_over_thinking() -> None:
    # The API rejects thinking together with tool_choice any/tool; the forced tool is kept.
    tools = [ir.Tool("f", None, {"type": "object"})]
    for choice in (ir.ToolChoice("required"), ir.ToolChoice("named", "f")):
        body = build(req(U(T("q")), tools=tools, tool_choice=choice, reasoning=ir.Reasoning(effort="high"),
                         temperature=0.3))
        assert "thinking" not in body and body["temperature"] == 0.3
    body = build(req(U(T("q")), tools=tools, tool_choice=ir.ToolChoice("auto"), reasoning=ir.Reasoning(effort="high")))
    assert body["thinking"]["type"] == "adaptive"


# ----------------------------------------------------------------- system messages, content, betas

def S(text: str) -> ir.Message:
    return ir.Message("system", [T(text)])


def test_a_mid_conversation_system_message_is_sent_at_its_position_with_its_beta() -> None:
    body = build(req(U(T("q")), S("Be terse."), A(T("ok")), U(T("again"))))
    assert [m["role"] for m in body["messages"]] == ["user", "system", "assistant", "user"]
    assert body["messages"][1] == {"role": "system", "content": [{"type": "text", "text": "Be terse."}]}
    assert anthropic.required_betas(body) == ["mid-conversation-system-2026-04-07"]
    assert anthropic.required_betas(build(req(U(T("q"))))) == []


def test_a_system_message_after_the_assistant_moves_after_the_next_user_turn() -> None:
    # Anthropic takes role "system" only right after a user turn.
    body = build(req(U(T("q")), A(T("ok")), S("Now in French."), U(T("again"))))
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "system"]


def test_a_system_message_never_separates_tool_calls_from_their_results() -> None:
    call = ir.ToolCallPart("toolu_1", "f", "{}")
    body = build(req(U(T("q")), A(call), S("Mind the budget."), U(ir.ToolResultPart("toolu_1", [T("42")]))))
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "system"]
    assert body["messages"][2]["content"][0]["type"] == "tool_result"
    assert not any(b.get("content") == repair.ORPHAN_RESULT_TEXT for m in body["messages"] for b in m["content"])


def test_a_trailing_system_message_after_the_assistant_is_said_as_the_user() -> None:
    body = build(req(U(T("q")), A(T("ok")), S("Continue in French.")))
    assert body["messages"][-1] == {"role": "user", "content": [{"type": "text", "text": "Continue in French."}]}


def test_context_management_and_output_format_need_their_betas() -> None:
    assert anthropic.required_betas({"messages": [], "context_management": {"edits": []}}) == [
        "context-management-2025-06-27"]
    assert anthropic.required_betas({"messages": [], "output_format": {}}) == ["structured-outputs-2025-11-13"]


def test_an_effort_needs_the_effort_beta() -> None:
    assert anthropic.required_betas({"messages": [], "output_config": {"effort": "high"}}) == ["effort-2025-11-24"]
    assert anthropic.required_betas({"messages": [], "output_config": {"format": {}}}) == []


def test_documents_become_document_blocks() -> None:
    body = build(req(U(
        ir.DocumentPart(data="JVBE", media_type="application/pdf", filename="q3.pdf"),
        ir.DocumentPart(url="https://example.com/a.pdf", title="A", context="ctx"),
        ir.DocumentPart(text="plain", media_type="text/plain", title="Notes"),
        ir.DocumentPart(data="aGVsbG8=", media_type="text/plain"),
    )))
    assert body["messages"][0]["content"] == [
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"},
         "title": "q3.pdf"},
        {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}, "title": "A",
         "context": "ctx"},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "plain"}, "title": "Notes"},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hello"}},
    ]


def test_a_document_in_a_tool_result_stays_in_it() -> None:
    doc = ir.DocumentPart(data="JVBE", media_type="application/pdf")
    body = build(req(U(T("q")), A(ir.ToolCallPart("t", "f", "{}")), U(ir.ToolResultPart("t", [T("see"), doc]))))
    assert body["messages"][2]["content"][0]["content"][1]["type"] == "document"


def test_a_foreign_file_id_is_refused_naming_the_field() -> None:
    doc = ir.DocumentPart(file_id="file-abc", param="messages[0].content[1].file.file_id")
    with pytest.raises(ir.InvalidRequest) as err:
        build(req(U(T("q"), doc)))
    assert err.value.param == "messages[0].content[1].file.file_id" and "file-abc" in err.value.message


def test_an_opaque_part_from_another_protocol_is_refused_by_type_and_path() -> None:
    part = ir.OpaquePart("input_audio", "openai_chat", {"type": "input_audio"}, "messages[1].content[0].type")
    with pytest.raises(ir.InvalidRequest) as err:
        build(req(U(T("q"), part)))
    assert err.value.param == "messages[1].content[0].type" and "'input_audio'" in err.value.message


def test_a_refusal_in_history_is_assistant_text() -> None:
    body = build(req(U(T("q")), A(ir.RefusalPart("I can't help with that.")), U(T("ok"))))
    assert body["messages"][1]["content"] == [{"type": "text", "text": "I can't help with that."}]


def test_logprobs_are_refused_and_false_is_ignored() -> None:
    with pytest.raises(ir.InvalidRequest) as err:
        build(req(U(T("q")), logprobs=True, top_logprobs=3))
    assert err.value.param == "logprobs"
    assert "logprobs" not in build(req(U(T("q")), logprobs=False))


def test_prompt_cache_key_is_dropped() -> None:
    assert "prompt_cache_key" not in build(req(U(T("q")), prompt_cache_key="k"))


def test_web_search_becomes_the_server_tool() -> None:
    search = ir.WebSearch(allowed_domains=["example.com"], user_location={"country": "FR", "city": "Paris"})
    body = build(req(U(T("q")), web_search=search, tools=[ir.Tool("f", None, {"type": "object"})]))
    assert body["tools"][-1] == {"type": "web_search_20250305", "name": "web_search",
                                 "allowed_domains": ["example.com"],
                                 "user_location": {"type": "approximate", "country": "FR", "city": "Paris"}}
    assert build(req(U(T("q")), web_search=ir.WebSearch()))["tools"] == [
        {"type": "web_search_20250305", "name": "web_search"}]


def test_structured_output_goes_to_output_config_format() -> None:
    schema = {"type": "object", "properties": {}, "additionalProperties": False}
    fmt = ir.ResponseFormat(type="json_schema", name="answer", schema=schema, strict=True)
    body = build(req(U(T("q")), response_format=fmt, reasoning=ir.Reasoning(effort="low")))
    assert body["output_config"] == {"effort": "low", "format": {"type": "json_schema", "schema": schema}}
    assert "output_config" not in build(req(U(T("q")), response_format=fmt), ir.UpstreamCaps(structured_output=False))
    # JSON mode has no Anthropic form (see the module docstring): dropped, the prompt already asks for JSON.
    assert "output_config" not in build(req(U(T("q")), response_format=ir.ResponseFormat(type="json_object")))
    assert "output_config" not in build(req(U(T("q")), response_format=ir.ResponseFormat(type="text")))


def test_passthrough_drops_structured_output_for_an_upstream_without_it() -> None:
    body = {"model": "c", "max_tokens": 1, "messages": [{"role": "user", "content": "q"}],
            "output_config": {"effort": "low", "format": {"type": "json_schema", "schema": {}}},
            "output_format": {"type": "json_schema", "schema": {}}}
    out = anthropic.passthrough_request(body, "u", ir.UpstreamCaps(structured_output=False))
    assert out["output_config"] == {"effort": "low"} and "output_format" not in out
    assert body["output_config"]["format"] == {"type": "json_schema", "schema": {}}  # the client's body is untouched
    only_format = {**body, "output_config": {"format": {"type": "json_schema", "schema": {}}}}
    no_format = ir.UpstreamCaps(structured_output=False)
    assert "output_config" not in anthropic.passthrough_request(only_format, "u", no_format)
    assert anthropic.passthrough_request(body, "u", CAPS)["output_config"] == body["output_config"]


def test_an_upstream_without_adaptive_thinking_gets_a_budget_and_no_effort() -> None:
    old = ir.UpstreamCaps(adaptive_thinking=False)
    body = build(req(U(T("q")), reasoning=ir.Reasoning(effort="low")), old)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": reasoning.effort_to_budget("low")}
    assert "output_config" not in body and body["max_tokens"] > body["thinking"]["budget_tokens"]
