"""IR → a Responses upstream body; and the same-protocol passthrough.

Tool results leave the user message as ``function_call_output`` items placed before
the user's own content. Reasoning survives only with its signature, as a reasoning
item carrying ``encrypted_content`` and no id (an unsigned summary cannot be
replayed: the API only accepts reasoning items it produced). ``stop`` has no Responses slot and is
dropped. With reasoning on we ask for ``reasoning.encrypted_content`` and
``store: false`` so that the signature can travel back through the client.
Mid-conversation system messages become ``developer`` message items at their position;
parts the IR kept opaque and foreign ``file_id`` documents are refused with a 400.
"""

from __future__ import annotations

from typing import Any, assert_never

from .. import documents, ir, reasoning, refuse, repair
from .tools import build_tool_choice, build_tools, build_web_search

NAME = "responses"
ENCRYPTED_REASONING = "reasoning.encrypted_content"
LOGPROBS_INCLUDE = "message.output_text.logprobs"


def _user_items(msg: ir.Message) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    for part in msg.parts:
        match part:
            case ir.ToolResultPart():
                results.append({"type": "function_call_output", "call_id": part.tool_call_id,
                                "output": _tool_output(part)})
            case ir.TextPart() | ir.ImagePart() | ir.DocumentPart():
                content.append(_input_part(part))
            case ir.OpaquePart():
                refuse.opaque(part, NAME)
            case ir.ToolCallPart() | ir.ReasoningPart() | ir.RefusalPart():
                pass  # not a user's: nothing to send
            case _:
                assert_never(part)
    if content:
        results.append({"type": "message", "role": "user", "content": content})
    return results


def _system_item(msg: ir.Message) -> dict[str, Any]:
    return {"type": "message", "role": "developer",
            "content": [{"type": "input_text", "text": p.text} for p in refuse.system_text(msg.parts, NAME)]}


def _input_part(part: ir.TextPart | ir.ImagePart | ir.DocumentPart) -> dict[str, Any]:
    match part:
        case ir.TextPart():
            return {"type": "input_text", "text": part.text}
        case ir.ImagePart():
            return _image(part)
        case ir.DocumentPart():
            return _file(part)
        case _:
            assert_never(part)


def _file(part: ir.DocumentPart) -> dict[str, Any]:
    if part.file_id is not None:
        refuse.file_id(part, NAME)
    text = documents.as_text(part)
    if text is not None:
        return {"type": "input_text", "text": text}
    if part.url is not None:
        return {"type": "input_file", "file_url": part.url}
    return {"type": "input_file", "file_data": documents.data_url(part), "filename": documents.filename(part)}


def _image(part: ir.ImagePart) -> dict[str, Any]:
    image: dict[str, Any] = {"type": "input_image", "image_url": part.as_url()}
    if part.detail:
        image["detail"] = part.detail
    return image


def _tool_output(part: ir.ToolResultPart) -> str | list[dict[str, Any]]:
    if all(isinstance(p, ir.TextPart) for p in part.content):
        return part.text()
    return [_input_part(p) for p in part.content]


def _assistant_items(msg: ir.Message) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []  # consecutive text parts share one message item

    def flush() -> None:
        if texts:
            items.append({"type": "message", "role": "assistant", "content": list(texts)})
            texts.clear()

    for part in msg.parts:
        if isinstance(part, ir.TextPart):
            texts.append({"type": "output_text", "text": part.text})
            continue
        if isinstance(part, ir.RefusalPart):
            texts.append({"type": "refusal", "refusal": part.text})
            continue
        if isinstance(part, ir.OpaquePart):
            refuse.opaque(part, NAME)
        flush()
        if isinstance(part, ir.ToolCallPart):
            items.append({"type": "function_call", "call_id": part.id, "name": part.name,
                          "arguments": part.arguments})
        elif isinstance(part, ir.ReasoningPart) and part.signature:
            # No "id": a reasoning item sent by id must be followed by the item that
            # followed it originally, by id too, and the IR keeps no message/call ids
            # (the API's 400 in test_openai_responses_thinking_with_modified_history).
            # Codex CLI replays reasoning the same way: encrypted content, no id.
            items.append({"type": "reasoning",
                          "summary": [{"type": "summary_text", "text": part.text}] if part.text else [],
                          "encrypted_content": part.signature})
    flush()
    return items


def _items(messages: list[ir.Message]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    placed = repair.defer_system_messages(messages, after_user_only=False)
    for msg in repair.complete_orphan_tool_calls(placed):
        match msg.role:
            case "user":
                items.extend(_user_items(msg))
            case "assistant":
                items.extend(_assistant_items(msg))
            case "system":
                items.append(_system_item(msg))
            case _:
                assert_never(msg.role)
    return items


def _text_format(fmt: ir.ResponseFormat) -> dict[str, Any]:
    if fmt.type != "json_schema":
        return {"type": fmt.type}
    out: dict[str, Any] = {"type": "json_schema", "name": fmt.name or "response", "schema": fmt.schema or {}}
    if fmt.description is not None:
        out["description"] = fmt.description
    if fmt.strict is not None:
        out["strict"] = fmt.strict
    return out


def build_request(req: ir.Request, model: str, caps: ir.UpstreamCaps) -> dict[str, Any]:
    refuse.several_choices(req, NAME)
    body: dict[str, Any] = {"model": model, "input": _items(req.messages), "stream": req.stream}
    if req.system:
        body["instructions"] = "\n\n".join(p.text for p in req.system)
    tools = build_tools(req.tools)
    if req.web_search is not None:
        tools.append(build_web_search(req.web_search))
    if tools:
        body["tools"] = tools
    if req.tool_choice is not None:
        body["tool_choice"] = build_tool_choice(req.tool_choice)
    parallel = req.parallel_tool_calls
    if parallel is None and req.tool_choice is not None and req.tool_choice.disable_parallel:
        parallel = False
    if parallel is not None:
        body["parallel_tool_calls"] = parallel
    if req.max_tokens is not None:
        body["max_output_tokens"] = req.max_tokens
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.top_p is not None:
        body["top_p"] = req.top_p
    include: list[str] = []
    if req.reasoning is not None and req.reasoning.enabled and caps.thinking:
        body["reasoning"] = {"effort": reasoning.openai_effort(req.reasoning), "summary": "auto"}
        include.append(ENCRYPTED_REASONING)
        body["store"] = False
    if req.logprobs:
        include.append(LOGPROBS_INCLUDE)
        if req.top_logprobs is not None:
            body["top_logprobs"] = req.top_logprobs
    if include:
        body["include"] = include
    if req.response_format is not None:
        body["text"] = {"format": _text_format(req.response_format)}
    if req.prompt_cache_key is not None:
        body["prompt_cache_key"] = req.prompt_cache_key
    if req.user is not None:
        body["user"] = req.user
    if req.metadata:
        body["metadata"] = dict(req.metadata)
    return body


def passthrough_request(body: dict[str, Any], model: str, caps: ir.UpstreamCaps) -> dict[str, Any]:
    """The client's own body with ``model`` replaced; an upstream without thinking loses
    ``reasoning`` and the encrypted-reasoning ``include`` entry, nothing else changes."""

    out = dict(body)
    out["model"] = model
    if not caps.thinking:
        out.pop("reasoning", None)
        include = out.get("include")
        if isinstance(include, list) and ENCRYPTED_REASONING in include:
            out["include"] = [x for x in include if x != ENCRYPTED_REASONING]
    return out
