import pytest

from translation import ir, repair
from translation.responses import build_request, parse_request, passthrough_request

CAPS = ir.UpstreamCaps()


def req(messages, **kw):
    return ir.Request(model="client-name", messages=messages, **kw)


def test_minimal_body():
    body = build_request(req([ir.Message("user", [ir.TextPart("hi")])], stream=True), "gpt-5", CAPS)
    assert body == {"model": "gpt-5", "stream": True, "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}


def test_system_parts_become_instructions():
    body = build_request(req([], system=[ir.TextPart("A"), ir.TextPart("B")]), "m", CAPS)
    assert body["instructions"] == "A\n\nB"


def test_images_become_input_image_urls():
    body = build_request(req([ir.Message("user", [
        ir.ImagePart(data="QUJD", media_type="image/png", detail="high"),
        ir.ImagePart(url="https://example.com/a.jpg")])]), "m", CAPS)
    assert body["input"][0]["content"] == [
        {"type": "input_image", "image_url": "data:image/png;base64,QUJD", "detail": "high"},
        {"type": "input_image", "image_url": "https://example.com/a.jpg"}]


def test_tool_round_trip_items_in_order_with_results_before_user_text():
    messages = [
        ir.Message("user", [ir.TextPart("weather?")]),
        ir.Message("assistant", [
            ir.ReasoningPart(text="think", signature="gAAAA-sig", id="rs_abc"),
            ir.TextPart("Checking."),
            ir.ToolCallPart(id="call_1", name="get_weather", arguments='{"city":"Paris"}'),
            ir.ToolCallPart(id="call_2", name="get_time", arguments="{}"),
        ]),
        ir.Message("user", [
            ir.TextPart("also this"),
            ir.ToolResultPart("call_1", [ir.TextPart("sunny")]),
            ir.ToolResultPart("call_2", [ir.TextPart("noon"), ir.ImagePart(url="https://x/c.png")]),
        ]),
    ]
    items = build_request(req(messages), "m", CAPS)["input"]
    assert [i["type"] for i in items] == ["message", "reasoning", "message", "function_call", "function_call",
                                          "function_call_output", "function_call_output", "message"]
    assert items[1] == {"type": "reasoning", "encrypted_content": "gAAAA-sig",
                        "summary": [{"type": "summary_text", "text": "think"}]}
    assert items[2] == {"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": "Checking."}]}
    assert items[3] == {"type": "function_call", "call_id": "call_1", "name": "get_weather",
                        "arguments": '{"city":"Paris"}'}
    assert items[5] == {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
    assert items[6]["output"] == [{"type": "input_text", "text": "noon"},
                                  {"type": "input_image", "image_url": "https://x/c.png"}]
    assert items[7] == {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "also this"}]}


def test_unsigned_reasoning_is_dropped():
    """The API only replays reasoning it produced (encrypted_content); a bare summary
    (e.g. Chat's reasoning_content) cannot be sent back."""
    items = build_request(req([ir.Message("assistant", [
        ir.ReasoningPart(text="unsigned thoughts"),
        ir.ReasoningPart(text="", redacted="opaque"),
        ir.ReasoningPart(text="", signature="EqQBCkYIBRgC-anthropic", id="thinking-1"),
        ir.TextPart("answer"),
    ])]), "m", CAPS)["input"]
    assert items == [
        {"type": "reasoning", "summary": [], "encrypted_content": "EqQBCkYIBRgC-anthropic"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "answer"}]},
    ]


def test_orphan_tool_calls_get_a_synthetic_result():
    items = build_request(req([
        ir.Message("assistant", [ir.ToolCallPart(id="call_9", name="f", arguments="{}")]),
        ir.Message("user", [ir.TextPart("never mind")]),
    ]), "m", CAPS)["input"]
    assert items[1] == {"type": "function_call_output", "call_id": "call_9",
                        "output": repair.ORPHAN_RESULT_TEXT}
    assert items[2]["role"] == "user"


def test_stop_sequences_have_no_responses_slot_and_are_dropped():
    body = build_request(req([], stop=["\n\n", "END"]), "m", CAPS)
    assert "stop" not in body and "END" not in str(body)


def test_tools_choice_and_scalars():
    body = build_request(req(
        [], tools=[ir.Tool("get_weather", "Weather", {"type": "object", "properties": {}})],
        tool_choice=ir.ToolChoice("named", name="get_weather", disable_parallel=True),
        max_tokens=300, temperature=0.5, top_p=0.9, user="u", metadata={"a": "b"}), "m", CAPS)
    assert body["tools"] == [{"type": "function", "name": "get_weather", "description": "Weather",
                              "parameters": {"type": "object", "properties": {}}, "strict": False}]
    assert body["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert body["parallel_tool_calls"] is False
    assert (body["max_output_tokens"], body["temperature"], body["top_p"]) == (300, 0.5, 0.9)
    assert (body["user"], body["metadata"]) == ("u", {"a": "b"})


@pytest.mark.parametrize("mode", ["auto", "none", "required"])
def test_tool_choice_modes(mode):
    assert build_request(req([], tool_choice=ir.ToolChoice(mode)), "m", CAPS)["tool_choice"] == mode


@pytest.mark.parametrize("reasoning, effort", [
    (ir.Reasoning(effort="low"), "low"),
    (ir.Reasoning(effort="xhigh"), "xhigh"),
    (ir.Reasoning(effort="max"), "xhigh"),
    (ir.Reasoning(budget_tokens=2000), "low"),
    (ir.Reasoning(budget_tokens=10000), "high"),
    (ir.Reasoning(), "medium"),
])
def test_reasoning_asks_for_encrypted_content_without_storage(reasoning, effort):
    body = build_request(req([], reasoning=reasoning), "m", CAPS)
    assert body["reasoning"] == {"effort": effort, "summary": "auto"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["store"] is False


def test_reasoning_disabled_or_unsupported_is_not_sent():
    assert "reasoning" not in build_request(req([], reasoning=ir.Reasoning(enabled=False)), "m", CAPS)
    body = build_request(req([], reasoning=ir.Reasoning(effort="high")), "m",
                         ir.UpstreamCaps(thinking=False))
    assert "reasoning" not in body and "include" not in body


def test_parse_then_build_keeps_a_codex_conversation():
    client = {"model": "codex", "instructions": "sys", "input": [
        {"role": "user", "content": "go"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"cmd\":\"ls\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
    ]}
    body = build_request(parse_request(client), "gpt-5", CAPS)
    assert body["instructions"] == "sys"
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        {"type": "reasoning", "summary": [], "encrypted_content": "enc"},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"cmd\":\"ls\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
    ]


def test_reasoning_is_replayed_without_its_item_id():
    """Recorded: the API answered 400 "Item 'rs_…' of type 'reasoning' was provided without
    its required following item" when a reasoning item went back by id but the assistant
    message after it had no id. The IR keeps no message ids, so reasoning ids stay home."""
    items = build_request(req([ir.Message("assistant", [
        ir.ReasoningPart(text="t", signature="gAAAA", id="rs_68c42de022c881948db7ed1cc2529f2e"),
        ir.TextPart("The meaning of life is 42")])]), "m", CAPS)["input"]
    assert "id" not in items[0] and items[0]["encrypted_content"] == "gAAAA"


def test_passthrough_replaces_model_and_keeps_everything_else():
    client = {"model": "alias", "input": "x", "tools": [{"type": "web_search"}], "store": False,
              "reasoning": {"effort": "high"}, "include": ["reasoning.encrypted_content", "x"],
              "unknown_field": {"a": 1}}
    out = passthrough_request(client, "gpt-5", CAPS)
    assert out == {**client, "model": "gpt-5"}
    assert client["model"] == "alias", "the client's dict is not modified"


def test_passthrough_without_thinking_removes_reasoning():
    client = {"model": "alias", "input": "x", "reasoning": {"effort": "high"},
              "include": ["reasoning.encrypted_content", "message.output_text.logprobs"]}
    out = passthrough_request(client, "m", ir.UpstreamCaps(thinking=False))
    assert out == {"model": "m", "input": "x", "include": ["message.output_text.logprobs"]}
    assert "reasoning" in client


U = lambda *parts: ir.Message("user", list(parts))  # noqa: E731
A = lambda *parts: ir.Message("assistant", list(parts))  # noqa: E731
T = ir.TextPart


def test_a_mid_conversation_system_message_is_a_developer_item_at_its_position():
    body = build_request(req([U(T("q")), A(T("a")), ir.Message("system", [T("Be terse.")]), U(T("again"))]),
                         "m", CAPS)
    assert [i.get("role") for i in body["input"]] == ["user", "assistant", "developer", "user"]
    assert body["input"][2] == {"type": "message", "role": "developer",
                                "content": [{"type": "input_text", "text": "Be terse."}]}


def test_documents_become_input_files_or_text():
    body = build_request(req([U(
        ir.DocumentPart(data="JVBE", media_type="application/pdf", filename="r.pdf"),
        ir.DocumentPart(url="https://example.com/b.pdf"),
        ir.DocumentPart(text="words", title="Notes"))]), "m", CAPS)
    assert body["input"][0]["content"] == [
        {"type": "input_file", "file_data": "data:application/pdf;base64,JVBE", "filename": "r.pdf"},
        {"type": "input_file", "file_url": "https://example.com/b.pdf"},
        {"type": "input_text", "text": "Notes\n\nwords"}]


def test_a_document_in_a_tool_result_is_part_of_the_output_list():
    pdf = ir.DocumentPart(data="JVBE", media_type="application/pdf")
    body = build_request(req([U(T("q")), A(ir.ToolCallPart("c", "f", "{}")),
                              U(ir.ToolResultPart("c", [T("see"), pdf]))]), "m", CAPS)
    assert body["input"][2]["output"] == [
        {"type": "input_text", "text": "see"},
        {"type": "input_file", "file_data": "data:application/pdf;base64,JVBE", "filename": "document.pdf"}]


@pytest.mark.parametrize("part, param", [
    (ir.DocumentPart(file_id="file_011", param="messages[0].content[0].source.file_id"),
     "messages[0].content[0].source.file_id"),
    (ir.OpaquePart("container_upload", "anthropic", {}, "messages[0].content[0].type"), "messages[0].content[0].type"),
])
def test_what_responses_cannot_carry_is_refused_by_name(part, param):
    with pytest.raises(ir.InvalidRequest) as err:
        build_request(req([U(T("q"), part)]), "m", CAPS)
    assert err.value.param == param


def test_an_opaque_part_in_assistant_history_is_refused():
    part = ir.OpaquePart("server_tool_use", "anthropic", {}, "messages[1].content[0].type")
    with pytest.raises(ir.InvalidRequest, match="server_tool_use"):
        build_request(req([U(T("q")), A(part)]), "m", CAPS)


def test_a_refusal_in_history_is_an_output_refusal_part():
    body = build_request(req([U(T("q")), A(ir.RefusalPart("No.")), U(T("ok"))]), "m", CAPS)
    assert body["input"][1]["content"] == [{"type": "refusal", "refusal": "No."}]


def test_text_format_logprobs_prompt_cache_key_and_web_search():
    schema = {"type": "object"}
    body = build_request(req([U(T("q"))], response_format=ir.ResponseFormat("json_schema", "a", schema, True),
                             logprobs=True, top_logprobs=4, prompt_cache_key="k",
                             reasoning=ir.Reasoning(effort="max"),
                             web_search=ir.WebSearch(allowed_domains=["x.org"], blocked_domains=["y.org"],
                                                     user_location={"country": "DE"}, max_uses=3)), "m", CAPS)
    assert body["text"] == {"format": {"type": "json_schema", "name": "a", "schema": schema, "strict": True}}
    assert body["include"] == ["reasoning.encrypted_content", "message.output_text.logprobs"]
    assert (body["top_logprobs"], body["prompt_cache_key"]) == (4, "k")
    assert body["reasoning"]["effort"] == "xhigh"
    assert body["tools"] == [{"type": "web_search", "filters": {"allowed_domains": ["x.org"]},
                              "user_location": {"type": "approximate", "country": "DE"}}]
    assert build_request(req([U(T("q"))], response_format=ir.ResponseFormat("json_object")), "m", CAPS)[
        "text"] == {"format": {"type": "json_object"}}
