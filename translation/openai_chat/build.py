"""IR request → Chat Completions upstream body, and the same-protocol passthrough.

Mid-conversation system messages stay at their position as ``system`` messages. A
hosted web search has no Chat tool (``web_search_options`` only works on the search
models) and is dropped, recorded in ``req.dropped_tools``. What Chat cannot carry and
the client would miss is refused with a 400 naming it: parts the IR kept opaque, a
Files-API ``file_id``, a document by URL, a PDF inside a tool result.
"""

from __future__ import annotations

from typing import Any, assert_never

from .. import documents, ir, reasoning, refuse, repair

NAME = "openai_chat"
WEB_SEARCH = "web_search"
# Fields a thinking-incapable upstream rejects.
_THINKING_FIELDS = ("reasoning_effort", "reasoning")


def build_request(req: ir.Request, model: str, caps: ir.UpstreamCaps) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": _messages(req), "stream": req.stream}
    if req.stream:
        body["stream_options"] = {"include_usage": True}
    if req.tools:
        body["tools"] = [_tool(t) for t in req.tools]
        if req.tool_choice is not None:
            body["tool_choice"] = _tool_choice(req.tool_choice)
        parallel = req.parallel_tool_calls
        if req.tool_choice is not None and req.tool_choice.disable_parallel:
            parallel = False
        if parallel is not None:
            body["parallel_tool_calls"] = parallel
    if req.max_tokens is not None:
        body["max_tokens"] = req.max_tokens
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.top_p is not None:
        body["top_p"] = req.top_p
    if req.stop:
        body["stop"] = list(req.stop)
    if req.reasoning is not None and req.reasoning.enabled and caps.thinking:
        body["reasoning_effort"] = reasoning.openai_effort(req.reasoning)
    if req.user is not None:
        body["user"] = req.user
    if req.metadata:
        body["metadata"] = dict(req.metadata)
    if req.response_format is not None:
        body["response_format"] = _response_format(req.response_format)
    if req.logprobs:
        body["logprobs"] = True
        if req.top_logprobs is not None:
            body["top_logprobs"] = req.top_logprobs
    if req.prompt_cache_key is not None:
        body["prompt_cache_key"] = req.prompt_cache_key
    if req.web_search is not None and WEB_SEARCH not in req.dropped_tools:
        req.dropped_tools.append(WEB_SEARCH)  # so that the gateway's log says it was not sent
    return body


def passthrough_request(body: dict[str, Any], model: str, caps: ir.UpstreamCaps) -> dict[str, Any]:
    """The client's own body with ``model`` replaced; a stream always asks for usage."""

    out = dict(body)
    out["model"] = model
    if out.get("stream") is True:
        options = out.get("stream_options")
        options = dict(options) if isinstance(options, dict) else {}
        options["include_usage"] = True
        out["stream_options"] = options
    if not caps.thinking:
        for key in _THINKING_FIELDS:
            out.pop(key, None)
    return out


def _response_format(fmt: ir.ResponseFormat) -> dict[str, Any]:
    if fmt.type != "json_schema":
        return {"type": fmt.type}
    spec: dict[str, Any] = {"name": fmt.name or "response"}
    if fmt.description is not None:
        spec["description"] = fmt.description
    if fmt.schema is not None:
        spec["schema"] = fmt.schema
    if fmt.strict is not None:
        spec["strict"] = fmt.strict
    return {"type": "json_schema", "json_schema": spec}


def _messages(req: ir.Request) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if req.system:
        out.append({"role": "system", "content": "\n\n".join(p.text for p in req.system)})
    placed = repair.defer_system_messages(req.messages, after_user_only=False)
    for message in repair.complete_orphan_tool_calls(placed):
        match message.role:
            case "user":
                out.extend(_user(message))
            case "system":
                out.append({"role": "system", "content": _text(message.parts)})
            case "assistant":
                assistant = _assistant(message)
                if assistant is not None:
                    out.append(assistant)
            case _:
                assert_never(message.role)
    return out


def _text(parts: list[ir.Part]) -> str:
    return "\n\n".join(p.text for p in refuse.system_text(parts, NAME))


def _user(message: ir.Message) -> list[dict[str, Any]]:
    """Tool results first, as ``tool`` messages (OpenAI requires assistant(tool_calls)
    → tool … → user); images inside a tool result have no Chat slot and are dropped,
    so is ``is_error``."""

    out: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    for part in message.parts:
        match part:
            case ir.ToolResultPart():
                out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": _result_text(part)})
            case ir.TextPart():
                content.append({"type": "text", "text": part.text})
            case ir.ImagePart():
                image: dict[str, Any] = {"url": part.as_url()}
                if part.detail is not None:
                    image["detail"] = part.detail
                content.append({"type": "image_url", "image_url": image})
            case ir.DocumentPart():
                content.append(_document(part))
            case ir.OpaquePart():
                refuse.opaque(part, NAME)
            case ir.ToolCallPart() | ir.ReasoningPart() | ir.RefusalPart():
                pass  # not a user's: nothing to send
            case _:
                assert_never(part)
    if len(content) == 1 and content[0]["type"] == "text":
        out.append({"role": "user", "content": content[0]["text"]})
    elif content:
        out.append({"role": "user", "content": content})
    return out


def _document(part: ir.DocumentPart) -> dict[str, Any]:
    if part.file_id is not None:
        refuse.file_id(part, NAME)
    text = documents.as_text(part)
    if text is not None:
        return {"type": "text", "text": text}
    if part.data is None:
        refuse.document_url(part, NAME)
    return {"type": "file", "file": {"file_data": documents.data_url(part), "filename": documents.filename(part)}}


def _result_text(part: ir.ToolResultPart) -> str:
    texts: list[str] = []
    for item in part.content:
        if isinstance(item, ir.DocumentPart):
            if item.file_id is not None:
                refuse.file_id(item, NAME)
            text = documents.as_text(item)
            if text is None:
                refuse.unsupported(item.param or "tool result", "a PDF inside a tool result", NAME)
            texts.append(text)
        elif isinstance(item, ir.TextPart):
            texts.append(item.text)
    return "".join(texts)


def _assistant(message: ir.Message) -> dict[str, Any] | None:
    """Text, refusal and tool calls; reasoning parts are dropped (upstreams do not take them back)."""

    for part in message.parts:
        if isinstance(part, ir.OpaquePart):
            refuse.opaque(part, NAME)
    texts = [p.text for p in message.parts if isinstance(p, ir.TextPart)]
    refusals = [p.text for p in message.parts if isinstance(p, ir.RefusalPart)]
    calls = [{"id": p.id, "type": "function", "function": {"name": p.name, "arguments": p.arguments}}
             for p in message.parts if isinstance(p, ir.ToolCallPart)]
    text = "\n\n".join(t for t in texts if t)
    if not text and not calls and not refusals:
        return None
    out: dict[str, Any] = {"role": "assistant", "content": text or None}
    if refusals:
        out["refusal"] = "\n\n".join(refusals)
    if calls:
        out["tool_calls"] = calls
    return out


def _tool(tool: ir.Tool) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name}
    if tool.description is not None:
        function["description"] = tool.description
    function["parameters"] = tool.parameters
    return {"type": "function", "function": function}


def _tool_choice(choice: ir.ToolChoice) -> str | dict[str, Any]:
    # SOP table: auto → "auto", any/required → "required", none → "none", tool X → function X.
    if choice.mode == "named":
        return {"type": "function", "function": {"name": choice.name or ""}}
    return choice.mode
