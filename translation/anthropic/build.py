"""IR request → Messages upstream body, and the same-protocol passthrough.

Reasoning: an effort (Chat ``reasoning_effort``, Responses ``reasoning.effort``)
becomes ``thinking: {"type": "adaptive"}`` with ``output_config.effort``, the only form
Claude 4.7 and later accept; a token budget (OpenRouter's ``reasoning.max_tokens``), or
any reasoning for an upstream without ``caps.adaptive_thinking`` (the models before 4.6),
is ``thinking: {"type": "enabled", "budget_tokens"}``.
Structured output goes to ``output_config.format``; Chat/Responses ``json_object``
(JSON mode) has no Anthropic form and is dropped: OpenAI only accepts it when the
conversation itself asks for JSON, so the instruction is already in the prompt, and
the ``{"type": "object"}`` schema it would become cannot pass Anthropic's
structured-output schema rules (``additionalProperties: false`` on every object).
"""

from __future__ import annotations

import base64
import urllib.parse
from typing import Any, assert_never

from .. import documents, ir, reasoning, refuse, repair
from . import breakpoints
from .wire import NAME, parse_arguments

DEFAULT_MAX_TOKENS = 4096
# The basic web search tool: every model with web search accepts it; the later versions
# (dynamic filtering) need Claude 4.6+ and the code execution tool.
WEB_SEARCH_TOOL = "web_search_20250305"
# anthropic-beta values a built body relies on (docs: mid-conversation system messages,
# context editing, the structured-outputs beta's top-level output_format).
MID_CONVERSATION_SYSTEM_BETA = "mid-conversation-system-2026-04-07"
CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
STRUCTURED_OUTPUTS_BETA = "structured-outputs-2025-11-13"
EFFORT_BETA = "effort-2025-11-24"
# Room for the answer itself when a thinking budget would eat the whole max_tokens.
ANSWER_HEADROOM = 4096
_TOOL_CHOICE: dict[str, str] = {"auto": "auto", "required": "any", "named": "tool", "none": "none"}
# Order of blocks inside one message: Anthropic wants tool results first in a
# user turn, and thinking → text → tool_use in an assistant turn.
_USER_ORDER = {"tool_result": 0}
_ASSISTANT_ORDER = {"thinking": 0, "redacted_thinking": 0, "tool_use": 2}


def build_request(req: ir.Request, model: str, caps: ir.UpstreamCaps) -> dict[str, Any]:
    refuse.several_choices(req, NAME)
    if req.logprobs:
        refuse.unsupported("logprobs", "returning token logprobs", NAME)
    body: dict[str, Any] = {"model": model, "max_tokens": req.max_tokens or DEFAULT_MAX_TOKENS}
    if len(req.system) == 1:
        body["system"] = req.system[0].text
    elif req.system:
        body["system"] = [{"type": "text", "text": p.text} for p in req.system]
    placed = repair.defer_system_messages(req.messages, after_user_only=True)
    body["messages"] = _messages(repair.complete_orphan_tool_calls(placed), caps)
    tools = [_tool(t) for t in req.tools]
    if req.web_search is not None:
        tools.append(_web_search(req.web_search))
    if tools:
        body["tools"] = tools
        choice = _tool_choice(req)
        if choice is not None:
            body["tool_choice"] = choice
    thinking = _thinking(req, caps)
    output_config = _output_config(req, caps, thinking)
    if output_config:
        body["output_config"] = output_config
    if thinking is not None:
        body["thinking"] = thinking
        budget = thinking.get("budget_tokens")
        if budget is not None and body["max_tokens"] <= budget:
            body["max_tokens"] = budget + ANSWER_HEADROOM
        elif budget is None and req.max_tokens is None and req.reasoning is not None:
            # Adaptive thinking spends max_tokens too; OpenAI clients that send none expect room for it.
            body["max_tokens"] = reasoning.effort_to_budget(req.reasoning.effort) + ANSWER_HEADROOM
        # With thinking on the API rejects temperature/top_p changes: dropped on purpose.
    else:
        if req.temperature is not None:
            body["temperature"] = req.temperature
        if req.top_p is not None:
            body["top_p"] = req.top_p
    if req.stop:
        body["stop_sequences"] = list(req.stop)
    if req.user is not None:
        body["metadata"] = {"user_id": req.user}
    body["stream"] = req.stream
    if caps.cache_breakpoints:
        breakpoints.place(body)  # where OpenAI would have cached the prompt unasked
    return body


# ----------------------------------------------------------------- messages


def _messages(messages: list[ir.Message], caps: ir.UpstreamCaps) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for msg in messages:
        parts: list[ir.Part] = [*refuse.system_text(msg.parts, NAME)] if msg.role == "system" else msg.parts
        blocks = [b for part in parts for b in _blocks(part, msg.role, caps)]
        if not blocks:
            continue  # an empty turn is a 400 upstream (e.g. only unsigned reasoning)
        role = msg.role
        if role == "system" and (not out or out[-1]["role"] not in ("user", "system")):
            # Anthropic takes role "system" only right after a user turn; one that cannot
            # be placed so (the conversation ends on the assistant) is said as the user.
            role = "user"
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)  # consecutive same-role turns merge
        else:
            out.append({"role": role, "content": blocks})
    for item in out:
        order = _USER_ORDER if item["role"] == "user" else _ASSISTANT_ORDER
        item["content"].sort(key=lambda b: order.get(b["type"], 1))  # stable
    return out


def _blocks(part: ir.Part, role: str, caps: ir.UpstreamCaps) -> list[dict[str, Any]]:
    match part:
        case ir.TextPart():
            # Anthropic rejects empty text blocks.
            return [{"type": "text", "text": part.text}] if part.text else []
        case ir.ImagePart():
            # Assistant turns cannot carry images on Anthropic.
            return [_image(part)] if role == "user" else []
        case ir.DocumentPart():
            return [_document(part)] if role == "user" else []
        case ir.RefusalPart():
            return [{"type": "text", "text": part.text}] if part.text else []
        case ir.OpaquePart():
            refuse.opaque(part, NAME)
        case ir.ToolCallPart():
            return [{"type": "tool_use", "id": part.id, "name": part.name, "input": parse_arguments(part.arguments)}]
        case ir.ToolResultPart():
            return [_tool_result(part)]
        case ir.ReasoningPart():
            return _reasoning(part, caps)
        case _:
            assert_never(part)


def _reasoning(part: ir.ReasoningPart, caps: ir.UpstreamCaps) -> list[dict[str, Any]]:
    if not caps.thinking:
        return []
    if part.redacted is not None:
        return [{"type": "redacted_thinking", "data": part.redacted}]
    if part.signature:
        return [{"type": "thinking", "thinking": part.text, "signature": part.signature}]
    # An unsigned thinking block is rejected upstream: dropped on purpose.
    return []


def _image(part: ir.ImagePart) -> dict[str, Any]:
    if part.data is not None:
        source = {"type": "base64", "media_type": part.media_type or "image/png", "data": part.data}
    elif part.url is not None and part.url.startswith("data:"):
        source = _data_url_source(part.url)
    else:
        source = {"type": "url", "url": part.url or ""}
    return {"type": "image", "source": source}


def _data_url_source(url: str) -> dict[str, Any]:
    """``data:<media type>[;base64],<payload>`` → a base64 source."""

    header, _, payload = url[len("data:"):].partition(",")
    params = header.split(";")
    media_type = params[0] or "image/png"
    if "base64" not in params[1:]:
        payload = base64.b64encode(urllib.parse.unquote_to_bytes(payload)).decode()
    return {"type": "base64", "media_type": media_type, "data": payload}


def _document(part: ir.DocumentPart) -> dict[str, Any]:
    if part.file_id is not None:
        refuse.file_id(part, NAME)
    text = documents.plain_text(part)
    if text is not None:
        source = {"type": "text", "media_type": "text/plain", "data": text}
    elif part.url is not None:
        source = {"type": "url", "url": part.url}
    else:
        source = {"type": "base64", "media_type": part.media_type or documents.PDF, "data": part.data or ""}
    block: dict[str, Any] = {"type": "document", "source": source}
    title = part.title or part.filename
    if title:
        block["title"] = title
    if part.context:
        block["context"] = part.context
    return block


def _result_block(part: ir.TextPart | ir.ImagePart | ir.DocumentPart) -> dict[str, Any]:
    match part:
        case ir.TextPart():
            return {"type": "text", "text": part.text}
        case ir.ImagePart():
            return _image(part)
        case ir.DocumentPart():
            return _document(part)
        case _:
            assert_never(part)


def _tool_result(part: ir.ToolResultPart) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.tool_call_id}
    if len(part.content) == 1 and isinstance(part.content[0], ir.TextPart):
        block["content"] = part.content[0].text
    elif part.content:
        block["content"] = [_result_block(p) for p in part.content
                            if not isinstance(p, ir.TextPart) or p.text]
    if part.is_error:
        block["is_error"] = True
    return block


# ----------------------------------------------------------------- tools and thinking


def _tool(tool: ir.Tool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["input_schema"] = tool.parameters or {"type": "object", "properties": {}}
    return out


def _tool_choice(req: ir.Request) -> dict[str, Any] | None:
    choice = req.tool_choice
    disable = req.parallel_tool_calls is False or (choice is not None and choice.disable_parallel)
    if choice is None:
        return {"type": "auto", "disable_parallel_tool_use": True} if disable else None
    out: dict[str, Any] = {"type": _TOOL_CHOICE[choice.mode]}
    if choice.mode == "named":
        out["name"] = choice.name or ""
    if disable and choice.mode != "none":
        out["disable_parallel_tool_use"] = True
    return out


def _web_search(search: ir.WebSearch) -> dict[str, Any]:
    tool: dict[str, Any] = {"type": WEB_SEARCH_TOOL, "name": "web_search"}
    # The API takes allowed_domains or blocked_domains, never both: the allow list wins.
    if search.allowed_domains:
        tool["allowed_domains"] = list(search.allowed_domains)
    elif search.blocked_domains:
        tool["blocked_domains"] = list(search.blocked_domains)
    if search.user_location:
        tool["user_location"] = {"type": "approximate", **search.user_location}
    if search.max_uses is not None:
        tool["max_uses"] = search.max_uses
    return tool


def _thinking(req: ir.Request, caps: ir.UpstreamCaps) -> dict[str, Any] | None:
    wanted = req.reasoning
    if wanted is None or not wanted.enabled or not caps.thinking:
        return None
    choice = req.tool_choice
    if req.tools and choice is not None and choice.mode in ("required", "named"):
        # "Tool use with extended thinking only supports tool_choice auto or none"
        # (Anthropic's extended-thinking docs): a forced tool wins, thinking is dropped.
        return None
    if wanted.budget_tokens is not None or not caps.adaptive_thinking:
        budget = wanted.budget_tokens or reasoning.effort_to_budget(wanted.effort)
        return {"type": "enabled", "budget_tokens": max(budget, reasoning.MIN_BUDGET)}
    return {"type": "adaptive"}


def _output_config(req: ir.Request, caps: ir.UpstreamCaps, thinking: dict[str, Any] | None) -> dict[str, Any]:
    config: dict[str, Any] = {}
    wanted = req.reasoning
    # Effort also steers a turn without thinking (a forced tool), so it outlives a dropped thinking block.
    if wanted is not None and wanted.enabled and caps.thinking and caps.adaptive_thinking and wanted.effort is not None:
        if thinking is None or thinking["type"] == "adaptive":
            config["effort"] = reasoning.anthropic_effort(wanted.effort)
    fmt = req.response_format
    if fmt is not None and fmt.type == "json_schema" and fmt.schema is not None and caps.structured_output:
        config["format"] = {"type": "json_schema", "schema": fmt.schema}
    return config


def required_betas(body: dict[str, Any]) -> list[str]:
    """The ``anthropic-beta`` values a built (or passed-through) Messages body relies on,
    for the gateway to merge into the request's header."""

    betas: list[str] = []
    messages = body.get("messages")
    if isinstance(messages, list) and any(isinstance(m, dict) and m.get("role") == "system" for m in messages):
        betas.append(MID_CONVERSATION_SYSTEM_BETA)
    if "context_management" in body:
        betas.append(CONTEXT_MANAGEMENT_BETA)
    if "output_format" in body:
        betas.append(STRUCTURED_OUTPUTS_BETA)
    config = body.get("output_config")
    if isinstance(config, dict) and "effort" in config:
        betas.append(EFFORT_BETA)
    return betas


# ----------------------------------------------------------------- passthrough


def passthrough_request(body: dict[str, Any], model: str, caps: ir.UpstreamCaps) -> dict[str, Any]:
    """The client's own body with ``model`` replaced and what ``caps`` forbids
    removed; everything else (unknown fields included) survives. The caller's
    objects are never mutated: what changes is copied first."""

    out = dict(body)
    out["model"] = model
    messages = out.get("messages")
    if isinstance(messages, list):
        messages = _complete_orphans(messages)
        if not caps.thinking:
            messages = [_without_thinking(m) for m in messages]
        if not caps.cache_control:
            messages = [_message_without_cache(m) for m in messages]
        out["messages"] = messages
    if not caps.thinking:
        out.pop("thinking", None)
    if not caps.structured_output:
        out.pop("output_format", None)
        config = out.get("output_config")
        if isinstance(config, dict) and "format" in config:
            config = {k: v for k, v in config.items() if k != "format"}
            if config:
                out["output_config"] = config
            else:
                out.pop("output_config")
    if not caps.cache_control:
        if isinstance(out.get("system"), list):
            out["system"] = [_without_cache(b) for b in out["system"]]
        if isinstance(out.get("tools"), list):
            out["tools"] = [_without_cache(t) for t in out["tools"]]
    if not caps.request_tags:
        out.pop("tags", None)
    return out


def _content(msg: Any) -> list[Any] | None:
    if isinstance(msg, dict) and isinstance(msg.get("content"), list):
        return list(msg["content"])
    return None


def _without_cache(block: Any) -> Any:
    if not isinstance(block, dict) or "cache_control" not in block and not isinstance(block.get("content"), list):
        return block
    out = {k: v for k, v in block.items() if k != "cache_control"}
    if isinstance(out.get("content"), list):  # tool_result content blocks
        out["content"] = [_without_cache(b) for b in out["content"]]
    return out


def _message_without_cache(msg: Any) -> Any:
    content = _content(msg)
    if content is None:
        return msg
    return {**msg, "content": [_without_cache(b) for b in content]}


def _without_thinking(msg: Any) -> Any:
    content = _content(msg)
    if content is None or msg.get("role") != "assistant":
        return msg
    kept = [b for b in content if not (isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking"))]
    return {**msg, "content": kept}


def _tool_use_ids(msg: Any) -> list[str]:
    content = _content(msg) or []
    return [b["id"] for b in content
            if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("id"), str)]


def _tool_result_ids(msg: Any) -> set[str]:
    content = _content(msg) or []
    return {b["tool_use_id"] for b in content
            if isinstance(b, dict) and b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str)}


def _complete_orphans(messages: list[Any]) -> list[Any]:
    """Answer each tool_use left without a tool_result in the next user turn
    with a synthetic error result (reference SOP, "Orphaned tool_use blocks")."""

    work = list(messages)
    out: list[Any] = []
    for i, msg in enumerate(work):
        out.append(msg)
        if not isinstance(msg, dict) or msg.get("role") != "assistant":
            continue
        ids = _tool_use_ids(msg)
        if not ids or i + 1 >= len(work):
            continue  # a trailing assistant turn is a prefill, not an orphan
        nxt = work[i + 1]
        is_user = isinstance(nxt, dict) and nxt.get("role") == "user"
        answered = _tool_result_ids(nxt) if is_user else set()
        synthetic: list[Any] = [
            {"type": "tool_result", "tool_use_id": cid, "content": repair.ORPHAN_RESULT_TEXT, "is_error": True}
            for cid in ids if cid not in answered
        ]
        if not synthetic:
            continue
        if is_user:
            content = nxt.get("content")
            rest = list(content) if isinstance(content, list) else (
                [{"type": "text", "text": content}] if isinstance(content, str) and content else [])
            work[i + 1] = {**nxt, "content": synthetic + rest}  # seen when the loop reaches it
        else:
            out.append({"role": "user", "content": synthetic})
    return out
