import pytest

from translation import ir
from translation.responses import parse_request


def body(**kw):
    return {"model": "gpt-5", "input": "hi", **kw}


def test_string_input_is_one_user_message():
    req = parse_request(body(input="Hello"))
    assert req.model == "gpt-5"
    assert req.messages == [ir.Message("user", [ir.TextPart("Hello")])]
    assert req.stream is False


def test_instructions_come_before_system_and_developer_messages():
    req = parse_request(body(instructions="Be brief.", input=[
        {"role": "developer", "content": "Use metric units."},
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "No emoji."}]},
        {"role": "user", "content": "Weather?"},
    ]))
    assert [p.text for p in req.system] == ["Be brief.", "Use metric units.", "No emoji."]
    assert req.messages == [ir.Message("user", [ir.TextPart("Weather?")])]


def test_content_parts_images_files_and_opaque_ones():
    by_id = {"type": "input_image", "file_id": "file-123"}
    audio = {"type": "input_audio", "input_audio": {"data": "AA", "format": "wav"}}
    req = parse_request(body(input=[{"role": "user", "content": [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "data:image/jpeg;base64,QUJD", "detail": "low"},
        {"type": "input_image", "image_url": "https://example.com/cat.png"},
        by_id,
        {"type": "input_file", "file_id": "file-456"},
        {"type": "input_file", "file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"},
        {"type": "input_file", "file_url": "https://example.com/b.pdf"},
        audio,
    ]}]))
    assert req.messages[0].parts == [
        ir.TextPart("What is this?"),
        ir.ImagePart(data="QUJD", media_type="image/jpeg", detail="low"),
        ir.ImagePart(url="https://example.com/cat.png"),
        ir.OpaquePart("input_image", "responses", by_id, "input[0].content[3].type"),
        ir.DocumentPart(file_id="file-456", param="input[0].content[4].file_id"),
        ir.DocumentPart(data="JVBE", media_type="application/pdf", filename="a.pdf"),
        ir.DocumentPart(url="https://example.com/b.pdf", media_type="application/pdf"),
        ir.OpaquePart("input_audio", "responses", audio, "input[0].content[7].type"),
    ]


def test_assistant_side_items_merge_into_one_assistant_message():
    req = parse_request(body(input=[
        {"role": "user", "content": "Add 2 and 3"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "A"},
                                                        {"type": "summary_text", "text": "B"}],
         "content": None, "encrypted_content": "gAAAA-sig"},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "Calling.", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "add",
         "arguments": "{\"a\":2,\"b\":3}", "status": "completed"},
        {"type": "function_call", "call_id": "call_2", "name": "add", "arguments": "{}"},
    ]))
    assert len(req.messages) == 2
    assistant = req.messages[1]
    assert assistant.role == "assistant"
    assert assistant.parts == [
        ir.ReasoningPart(text="A\n\nB", signature="gAAAA-sig", id="rs_1"),
        ir.TextPart("Calling."),
        ir.ToolCallPart(id="call_1", name="add", arguments="{\"a\":2,\"b\":3}"),
        ir.ToolCallPart(id="call_2", name="add", arguments="{}"),
    ]


def test_tool_outputs_and_following_user_message_merge_results_first():
    req = parse_request(body(input=[
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "one"},
        {"type": "function_call_output", "call_id": "c2", "output": [
            {"type": "input_text", "text": "two"},
            {"type": "input_image", "image_url": "https://example.com/x.png"}]},
        {"role": "user", "content": "thanks"},
        {"role": "user", "content": "and again"},
    ]))
    assert [m.role for m in req.messages] == ["assistant", "user", "user"]
    results = req.messages[1].parts
    assert results[0] == ir.ToolResultPart("c1", [ir.TextPart("one")])
    assert results[1] == ir.ToolResultPart("c2", [ir.TextPart("two"), ir.ImagePart(url="https://example.com/x.png")])
    assert results[2] == ir.TextPart("thanks")
    assert req.messages[2].parts == [ir.TextPart("and again")]


def test_reasoning_item_with_raw_text_only_uses_it():
    req = parse_request(body(input=[{"type": "reasoning", "id": "x", "summary": [],
                                     "content": [{"type": "reasoning_text", "text": "raw"}]}]))
    assert req.messages[0].parts == [ir.ReasoningPart(text="raw", id="x")]


def test_builtin_items_and_item_references_are_kept_opaque_with_their_path():
    req = parse_request(body(input=[
        {"role": "user", "content": "search"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}},
        {"type": "item_reference", "id": "msg_old"},
        {"type": "custom_tool_call", "call_id": "ct_1", "name": "apply_patch", "input": "*** Begin Patch"},
        {"type": "custom_tool_call_output", "call_id": "ct_1", "output": "ok"},
        {"type": "some_future_item", "id": "x"},
        {"role": "assistant", "content": "done"},
    ]))
    assert [m.role for m in req.messages] == ["user", "assistant", "user", "assistant"]
    kinds = [(p.kind, p.param) for m in req.messages for p in m.parts if isinstance(p, ir.OpaquePart)]
    assert kinds == [("web_search_call", "input[1].type"), ("item_reference", "input[2].type"),
                     ("custom_tool_call", "input[3].type"), ("custom_tool_call_output", "input[4].type"),
                     ("some_future_item", "input[5].type")]
    assert req.messages[3].parts[-1] == ir.TextPart("done")


def test_late_developer_messages_stay_in_place():
    req = parse_request(body(instructions="I", input=[
        {"role": "developer", "content": "D1"}, {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"}, {"role": "developer", "content": "Now terse."},
        {"role": "user", "content": "again"}]))
    assert [p.text for p in req.system] == ["I", "D1"]
    assert [m.role for m in req.messages] == ["user", "assistant", "system", "user"]
    assert req.messages[2].parts == [ir.TextPart("Now terse.")]


def test_assistant_refusal_parts_and_documents_in_tool_output():
    req = parse_request(body(input=[
        {"role": "user", "content": "q"},
        {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": [
            {"type": "input_file", "file_data": "data:application/pdf;base64,JVBE", "filename": "r.pdf"}]},
    ]))
    assert req.messages[1].parts[0] == ir.RefusalPart("No.")
    assert req.messages[2].parts == [ir.ToolResultPart("c", [
        ir.DocumentPart(data="JVBE", media_type="application/pdf", filename="r.pdf")])]


def test_a_namespaced_function_call_carries_the_flat_tool_name():
    req = parse_request(body(
        tools=[{"type": "namespace", "name": "multi_agent_v1", "tools": [
            {"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}}]}],
        input=[{"role": "user", "content": "q"},
               {"type": "function_call", "call_id": "c", "name": "spawn_agent", "namespace": "multi_agent_v1",
                "arguments": "{}"}]))
    assert [t.name for t in req.tools] == ["multi_agent_v1__spawn_agent"]
    assert req.messages[1].parts == [ir.ToolCallPart("c", "multi_agent_v1__spawn_agent", "{}")]


def test_text_format_logprobs_cache_key_and_web_search():
    schema = {"type": "object"}
    req = parse_request(body(text={"format": {"type": "json_schema", "name": "a", "schema": schema, "strict": True}},
                             include=["message.output_text.logprobs"], top_logprobs=3, prompt_cache_key="k",
                             tools=[{"type": "web_search", "filters": {"allowed_domains": ["x.org"]},
                                     "user_location": {"type": "approximate", "country": "DE"}}],
                             store=False, client_metadata={"session_id": "s"}))
    assert req.response_format == ir.ResponseFormat("json_schema", "a", schema, True)
    assert (req.logprobs, req.top_logprobs, req.prompt_cache_key) == (True, 3, "k")
    assert req.web_search == ir.WebSearch(allowed_domains=["x.org"], user_location={"country": "DE"})
    assert req.dropped_tools == []
    assert parse_request(body(text={"format": {"type": "json_object"}})).response_format == \
        ir.ResponseFormat("json_object")
    assert parse_request(body(text={"verbosity": "low"})).response_format is None


def test_codex_cli_body_parses_with_extras_ignored():
    req = parse_request({
        "model": "gpt-5-codex", "instructions": "You are Codex.",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sandbox"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<env/>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
        ],
        "tools": [
            {"type": "function", "name": "shell", "description": "Runs a command", "strict": False,
             "parameters": {"type": "object", "properties": {"command": {"type": "array"}}}},
            {"type": "custom", "name": "apply_patch", "description": "patch",
             "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}},
            {"type": "web_search"}, {"type": "local_shell"},
        ],
        "tool_choice": "auto", "parallel_tool_calls": False,
        "reasoning": {"effort": "high", "summary": "auto"},
        "store": False, "stream": True, "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "abc", "text": {"verbosity": "low"}, "service_tier": "auto",
        "previous_response_id": None, "truncation": "auto", "stop": ["x"],
    })
    assert req.stream is True
    assert [p.text for p in req.system] == ["You are Codex.", "sandbox"]
    assert [m.role for m in req.messages] == ["user", "user"]
    assert [t.name for t in req.tools] == ["shell"]
    assert req.dropped_tools == ["custom:apply_patch", "local_shell"]
    assert req.web_search == ir.WebSearch()
    assert req.prompt_cache_key == "abc"
    assert req.tool_choice == ir.ToolChoice("auto", disable_parallel=True)
    assert req.parallel_tool_calls is False
    assert req.reasoning == ir.Reasoning(enabled=True, effort="high")
    assert req.stop == []


def test_namespace_tools_become_plain_functions():
    req = parse_request(body(tools=[{"type": "namespace", "name": "crm", "description": "CRM", "tools": [
        {"type": "function", "name": "find_customer", "parameters": {"type": "object"}},
        {"type": "custom", "name": "freeform"},
    ]}, {"type": "function", "name": "no_params"}]))
    assert [(t.name, t.parameters) for t in req.tools] == [
        ("crm__find_customer", {"type": "object"}), ("no_params", {"type": "object", "properties": {}})]
    assert req.dropped_tools == ["custom:freeform"]


@pytest.mark.parametrize("choice, expected", [
    ("auto", ir.ToolChoice("auto")),
    ("none", ir.ToolChoice("none")),
    ("required", ir.ToolChoice("required")),
    ({"type": "function", "name": "shell"}, ir.ToolChoice("named", name="shell")),
    ({"type": "allowed_tools", "mode": "auto", "tools": []}, ir.ToolChoice("auto")),
    ({"type": "web_search_preview"}, ir.ToolChoice("auto")),
])
def test_tool_choice(choice, expected):
    assert parse_request(body(tool_choice=choice)).tool_choice == expected


def test_scalar_fields():
    req = parse_request(body(max_output_tokens=256, temperature=0.2, top_p=1, user="u-1",
                             metadata={"k": "v"}, stream=True, parallel_tool_calls=True))
    assert (req.max_tokens, req.temperature, req.top_p, req.user) == (256, 0.2, 1.0, "u-1")
    assert req.metadata == {"k": "v"} and req.stream and req.parallel_tool_calls is True


@pytest.mark.parametrize("reasoning, expected", [
    ({"effort": "low"}, ir.Reasoning(effort="low")),
    ({"summary": "auto"}, ir.Reasoning(effort=None)),
    ({"effort": "none"}, ir.Reasoning(enabled=False)),
    (None, None),
])
def test_reasoning_config(reasoning, expected):
    assert parse_request(body(reasoning=reasoning)).reasoning == expected


@pytest.mark.parametrize("bad, param", [
    ({"input": "hi"}, "model"),
    ({"model": 5, "input": "hi"}, "model"),
    ({"model": "", "input": "hi"}, "model"),
    ({"model": "m"}, "input"),
    ({"model": "m", "input": 3}, "input"),
    (body(input=["hi"]), "input[0]"),
    (body(input=[{"type": 7}]), "input[0].type"),
    (body(input=[{"role": "robot", "content": "x"}]), "input[0].role"),
    (body(input=[{"role": "user"}]), "input[0].content"),
    (body(input=[{"role": "user", "content": 5}]), "input[0].content"),
    (body(input=[{"role": "user", "content": ["x"]}]), "input[0].content[0]"),
    (body(input=[{"role": "user", "content": [{"text": "no type"}]}]), "input[0].content[0].type"),
    (body(input=[{"role": "user", "content": [{"type": "input_text"}]}]), "input[0].content[0].text"),
    (body(input=[{"role": "user", "content": [{"type": "input_text", "text": 1}]}]),
     "input[0].content[0].text"),
    (body(input=[{"role": "user", "content": [{"type": "input_image"}]}]),
     "input[0].content[0].image_url"),
    (body(input=[{"role": "user", "content": [{"type": "input_image", "image_url": "data:image/png,xx"}]}]),
     "input[0].content[0].image_url"),
    (body(input=[{"role": "assistant", "content": [{"type": "input_image", "image_url": "https://x"}]}]),
     "input[0].content[0].type"),
    (body(input=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
                 {"role": "user", "content": "c"},
                 {"type": "function_call_output", "call_id": 3, "output": "x"}]), "input[3].call_id"),
    (body(input=[{"type": "function_call_output", "call_id": "c"}]), "input[0].output"),
    (body(input=[{"type": "function_call_output", "call_id": "c", "output": 5}]), "input[0].output"),
    (body(input=[{"type": "function_call", "name": "f", "arguments": "{}"}]), "input[0].call_id"),
    (body(input=[{"type": "function_call", "call_id": "c", "arguments": "{}"}]), "input[0].name"),
    (body(input=[{"type": "function_call", "call_id": "c", "name": "f", "arguments": 5}]), "input[0].arguments"),
    (body(input=[{"type": "reasoning", "summary": "x"}]), "input[0].summary"),
    (body(input=[{"type": "reasoning", "summary": [{"type": "summary_text"}]}]), "input[0].summary[0].text"),
    (body(input=[{"type": "reasoning", "summary": [], "encrypted_content": 5}]), "input[0].encrypted_content"),
    (body(instructions=["x"]), "instructions"),
    (body(tools={}), "tools"),
    (body(tools=["x"]), "tools[0]"),
    (body(tools=[{"name": "f"}]), "tools[0].type"),
    (body(tools=[{"type": "function"}]), "tools[0].name"),
    (body(tools=[{"type": "function", "name": "f", "parameters": "x"}]), "tools[0].parameters"),
    (body(tools=[{"type": "function", "name": "f", "description": 1}]), "tools[0].description"),
    (body(tools=[{"type": "namespace", "name": "n"}]), "tools[0].tools"),
    (body(tools=[{"type": "namespace", "tools": []}]), "tools[0].name"),
    (body(tools=[{"type": "namespace", "name": "n", "tools": [{"type": "function"}]}]), "tools[0].tools[0].name"),
    (body(tool_choice="any"), "tool_choice"),
    (body(tool_choice=3), "tool_choice"),
    (body(tool_choice={"type": "function"}), "tool_choice.name"),
    (body(tool_choice={}), "tool_choice.type"),
    (body(max_output_tokens="100"), "max_output_tokens"),
    (body(max_output_tokens=True), "max_output_tokens"),
    (body(temperature="hot"), "temperature"),
    (body(top_p=[1]), "top_p"),
    (body(stream="yes"), "stream"),
    (body(parallel_tool_calls="no"), "parallel_tool_calls"),
    (body(user=5), "user"),
    (body(metadata=[]), "metadata"),
    (body(metadata={"k": 1}), "metadata.k"),
    (body(reasoning="high"), "reasoning"),
    (body(reasoning={"effort": 3}), "reasoning.effort"),
])
def test_bad_bodies_name_the_field(bad, param):
    with pytest.raises(ir.InvalidRequest) as info:
        parse_request(bad)
    assert info.value.param == param
    assert info.value.message.startswith(param + ":")


@pytest.mark.parametrize("bad", [None, [], "text", 3])
def test_body_must_be_an_object(bad):
    with pytest.raises(ir.InvalidRequest) as info:
        parse_request(bad)
    assert info.value.param is None
