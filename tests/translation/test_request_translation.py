"""A client body of one protocol, parsed and built for another: what each target
carries, and the 400 (naming the client's own field) for what it cannot."""

from __future__ import annotations

from typing import Any

import pytest

from translation import ir, registry

CAPS = ir.UpstreamCaps()


def translate(source: str, body: dict[str, Any], target: str) -> dict[str, Any]:
    return registry.get(target).build_request(registry.get(source).parse_request(body), "up", CAPS)


def anthropic_body(*content: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "c", "max_tokens": 100, "messages": [{"role": "user", "content": list(content)}], **extra}


def chat_body(*content: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "c", "messages": [{"role": "user", "content": list(content)}], **extra}


def test_an_anthropic_pdf_reaches_chat_as_a_file_and_comes_back_the_same() -> None:
    pdf = {"type": "document", "title": "Q3", "source": {"type": "base64", "media_type": "application/pdf",
                                                         "data": "JVBERi0x"}}
    chat = translate("anthropic", anthropic_body(pdf, {"type": "text", "text": "Summarise"}), "openai_chat")
    assert chat["messages"][0]["content"][0] == {
        "type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0x", "filename": "Q3"}}
    back = translate("openai_chat", chat, "anthropic")
    assert back["messages"][0]["content"][0]["source"] == pdf["source"]


def test_a_responses_file_url_reaches_anthropic_as_a_url_document_and_chat_refuses_it() -> None:
    body = {"model": "c", "input": [{"role": "user", "content": [
        {"type": "input_file", "file_url": "https://example.com/a.pdf"}]}]}
    claude = translate("responses", body, "anthropic")
    assert claude["messages"][0]["content"][0] == {"type": "document",
                                                   "source": {"type": "url", "url": "https://example.com/a.pdf"}}
    with pytest.raises(ir.InvalidRequest, match="URL"):
        translate("responses", body, "openai_chat")


@pytest.mark.parametrize("source, body, param", [
    ("openai_chat", chat_body({"type": "text", "text": "q"}, {"type": "file", "file": {"file_id": "file-1"}}),
     "messages[0].content[1].file.file_id"),
    ("anthropic", anthropic_body({"type": "document", "source": {"type": "file", "file_id": "file_01"}}),
     "messages[0].content[0].source.file_id"),
    ("responses", {"model": "c", "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
     "input[0].content[0].file_id"),
])
def test_a_file_id_cannot_cross_to_another_protocol(source: str, body: dict[str, Any], param: str) -> None:
    for target in registry.PROTOCOLS:
        if target == source:
            continue
        with pytest.raises(ir.InvalidRequest) as err:
            translate(source, body, target)
        assert err.value.param == param and "file_id" in err.value.message


@pytest.mark.parametrize("source, body, param, kind", [
    ("anthropic", anthropic_body({"type": "search_result", "source": "s", "title": "t", "content": []}),
     "messages[0].content[0].type", "search_result"),
    ("anthropic", anthropic_body({"type": "bogus"}), "messages[0].content[0].type", "bogus"),
    ("openai_chat", chat_body({"type": "input_audio", "input_audio": {"data": "AA", "format": "wav"}}),
     "messages[0].content[0].type", "input_audio"),
    ("responses", {"model": "c", "input": [{"role": "user", "content": "q"},
                                           {"type": "local_shell_call", "call_id": "x", "action": {}}]},
     "input[1].type", "local_shell_call"),
])
def test_what_the_ir_keeps_opaque_is_refused_by_every_other_protocol(source: str, body: dict[str, Any],
                                                                     param: str, kind: str) -> None:
    registry.get(source).parse_request(body)  # the parser itself never refuses it
    for target in registry.PROTOCOLS:
        if target == source:
            continue
        with pytest.raises(ir.InvalidRequest) as err:
            translate(source, body, target)
        assert err.value.param == param and repr(kind) in err.value.message


def test_structured_output_travels_chat_to_responses_to_anthropic() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
              "additionalProperties": False}
    chat = chat_body({"type": "text", "text": "q"}, response_format={
        "type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}})
    resp = translate("openai_chat", chat, "responses")
    assert resp["text"] == {"format": {"type": "json_schema", "name": "answer", "schema": schema, "strict": True}}
    claude = translate("responses", resp, "anthropic")
    assert claude["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    back = translate("anthropic", claude, "openai_chat")
    assert back["response_format"]["json_schema"]["schema"] == schema


def test_logprobs_between_chat_and_responses_and_refused_by_anthropic() -> None:
    chat = chat_body({"type": "text", "text": "q"}, logprobs=True, top_logprobs=5)
    resp = translate("openai_chat", chat, "responses")
    assert resp["include"] == ["message.output_text.logprobs"] and resp["top_logprobs"] == 5
    again = translate("responses", resp, "openai_chat")
    assert (again["logprobs"], again["top_logprobs"]) == (True, 5)
    with pytest.raises(ir.InvalidRequest) as err:
        translate("openai_chat", chat, "anthropic")
    assert err.value.param == "logprobs"
    assert "logprobs" not in translate("openai_chat", {**chat, "logprobs": False}, "anthropic")


def test_reasoning_effort_in_every_direction() -> None:
    claude = anthropic_body({"type": "text", "text": "q"}, thinking={"type": "adaptive"},
                            output_config={"effort": "max"})
    assert translate("anthropic", claude, "openai_chat")["reasoning_effort"] == "xhigh"
    assert translate("anthropic", claude, "responses")["reasoning"]["effort"] == "xhigh"
    chat = chat_body({"type": "text", "text": "q"}, reasoning_effort="low")
    built = translate("openai_chat", chat, "anthropic")
    assert built["thinking"] == {"type": "adaptive"} and built["output_config"] == {"effort": "low"}
    resp = {"model": "c", "input": "q", "reasoning": {"effort": "medium", "summary": "auto"}}
    assert translate("responses", resp, "anthropic")["output_config"] == {"effort": "medium"}
    assert "thinking" not in translate("openai_chat", {**chat, "reasoning_effort": "none"}, "anthropic")


def test_a_refusal_in_history_crosses_every_protocol() -> None:
    chat = {"model": "c", "messages": [{"role": "user", "content": "q"},
                                       {"role": "assistant", "content": None, "refusal": "I can't help."},
                                       {"role": "user", "content": "ok"}]}
    resp = translate("openai_chat", chat, "responses")
    assert resp["input"][1]["content"] == [{"type": "refusal", "refusal": "I can't help."}]
    assert translate("responses", resp, "openai_chat")["messages"][1]["refusal"] == "I can't help."
    claude = translate("responses", resp, "anthropic")
    assert claude["messages"][1] == {"role": "assistant", "content": [{"type": "text", "text": "I can't help."}]}


def test_an_anthropic_web_search_reaches_responses_and_is_dropped_for_chat() -> None:
    body = anthropic_body({"type": "text", "text": "news?"}, tools=[
        {"type": "web_search_20250305", "name": "web_search", "allowed_domains": ["example.com"], "max_uses": 2}])
    assert translate("anthropic", body, "responses")["tools"] == [
        {"type": "web_search", "filters": {"allowed_domains": ["example.com"]}}]
    req = registry.get("anthropic").parse_request(body)
    chat = registry.get("openai_chat").build_request(req, "up", CAPS)
    assert "tools" not in chat and req.dropped_tools == ["web_search"]


def test_documents_inside_tool_results_cross_to_anthropic_and_responses() -> None:
    body = {"model": "c", "max_tokens": 10, "messages": [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "fetch", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "page text"},
             "title": "Page"}]}]}]}
    resp = translate("anthropic", body, "responses")
    assert resp["input"][2] == {"type": "function_call_output", "call_id": "t1",
                                "output": [{"type": "input_text", "text": "Page\n\npage text"}]}
    chat = translate("anthropic", body, "openai_chat")
    assert chat["messages"][2] == {"role": "tool", "tool_call_id": "t1", "content": "Page\n\npage text"}


def test_a_file_in_a_late_developer_message_is_refused_not_dropped() -> None:
    body = {"model": "c", "input": [
        {"role": "user", "content": "q"},
        {"role": "developer", "content": [{"type": "input_file", "file_data": "data:application/pdf;base64,JVBE"}]}]}
    for target in ("openai_chat", "anthropic"):
        with pytest.raises(ir.InvalidRequest, match="system or developer message"):
            translate("responses", body, target)
