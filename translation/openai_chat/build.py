"""IR request → Chat Completions upstream body, and the same-protocol passthrough."""

from __future__ import annotations

from typing import Any

from .. import ir, reasoning, repair

# Efforts an OpenAI-style upstream understands; others go through the budget table.
_CHAT_EFFORTS = frozenset({"minimal", "low", "medium", "high", "xhigh"})
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
        body["reasoning_effort"] = _effort(req.reasoning)
    if req.user is not None:
        body["user"] = req.user
    if req.metadata:
        body["metadata"] = dict(req.metadata)
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


def _effort(r: ir.Reasoning) -> str:
    if r.effort is not None:
        if r.effort in _CHAT_EFFORTS:
            return r.effort
        return reasoning.budget_to_effort(reasoning.effort_to_budget(r.effort))
    return reasoning.budget_to_effort(r.budget_tokens)


def _messages(req: ir.Request) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if req.system:
        out.append({"role": "system", "content": "\n\n".join(p.text for p in req.system)})
    for message in repair.complete_orphan_tool_calls(req.messages):
        if message.role == "user":
            out.extend(_user(message))
        else:
            assistant = _assistant(message)
            if assistant is not None:
                out.append(assistant)
    return out


def _user(message: ir.Message) -> list[dict[str, Any]]:
    """Tool results first, as ``tool`` messages (OpenAI requires assistant(tool_calls)
    → tool … → user); images inside a tool result have no Chat slot and are dropped,
    so is ``is_error``."""

    out: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ir.ToolResultPart):
            out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": part.text()})
        elif isinstance(part, ir.TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ir.ImagePart):
            image: dict[str, Any] = {"url": part.as_url()}
            if part.detail is not None:
                image["detail"] = part.detail
            content.append({"type": "image_url", "image_url": image})
    if len(content) == 1 and content[0]["type"] == "text":
        out.append({"role": "user", "content": content[0]["text"]})
    elif content:
        out.append({"role": "user", "content": content})
    return out


def _assistant(message: ir.Message) -> dict[str, Any] | None:
    """Text and tool calls; reasoning parts are dropped (upstreams do not take them back)."""

    texts = [p.text for p in message.parts if isinstance(p, ir.TextPart)]
    calls = [{"id": p.id, "type": "function", "function": {"name": p.name, "arguments": p.arguments}}
             for p in message.parts if isinstance(p, ir.ToolCallPart)]
    text = "\n\n".join(t for t in texts if t)
    if not text and not calls:
        return None
    out: dict[str, Any] = {"role": "assistant", "content": text or None}
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
