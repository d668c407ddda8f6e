"""IR → a Responses upstream body; and the same-protocol passthrough.

Tool results leave the user message as ``function_call_output`` items placed before
the user's own content. Reasoning survives only with its signature, as a reasoning
item carrying ``encrypted_content`` and no id (an unsigned summary cannot be
replayed: the API only accepts reasoning items it produced). ``stop`` has no Responses slot and is
dropped. With reasoning on we ask for ``reasoning.encrypted_content`` and
``store: false`` so that the signature can travel back through the client.
"""

from __future__ import annotations

from typing import Any

from .. import ir, repair
from ..reasoning import budget_to_effort
from .tools import build_tool_choice, build_tools

# Efforts the Responses API accepts; others (Anthropic's "max") are mapped onto them.
_EFFORTS = ("minimal", "low", "medium", "high", "xhigh")
_EFFORT_ALIASES = {"max": "xhigh"}
ENCRYPTED_REASONING = "reasoning.encrypted_content"


def _user_items(msg: ir.Message) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    for part in msg.parts:
        if isinstance(part, ir.ToolResultPart):
            results.append({"type": "function_call_output", "call_id": part.tool_call_id,
                            "output": _tool_output(part)})
        elif isinstance(part, ir.TextPart):
            content.append({"type": "input_text", "text": part.text})
        elif isinstance(part, ir.ImagePart):
            content.append(_image(part))
    if content:
        results.append({"type": "message", "role": "user", "content": content})
    return results


def _image(part: ir.ImagePart) -> dict[str, Any]:
    image: dict[str, Any] = {"type": "input_image", "image_url": part.as_url()}
    if part.detail:
        image["detail"] = part.detail
    return image


def _tool_output(part: ir.ToolResultPart) -> str | list[dict[str, Any]]:
    if not any(isinstance(p, ir.ImagePart) for p in part.content):
        return part.text()
    return [_image(p) if isinstance(p, ir.ImagePart) else {"type": "input_text", "text": p.text}
            for p in part.content]


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


def _effort(reasoning: ir.Reasoning) -> str:
    effort = _EFFORT_ALIASES.get(reasoning.effort or "", reasoning.effort)
    if effort in _EFFORTS:
        return effort
    return budget_to_effort(reasoning.budget_tokens)


def build_request(req: ir.Request, model: str, caps: ir.UpstreamCaps) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for msg in repair.complete_orphan_tool_calls(req.messages):
        items.extend(_user_items(msg) if msg.role == "user" else _assistant_items(msg))
    body: dict[str, Any] = {"model": model, "input": items, "stream": req.stream}
    if req.system:
        body["instructions"] = "\n\n".join(p.text for p in req.system)
    if req.tools:
        body["tools"] = build_tools(req.tools)
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
    if req.reasoning is not None and req.reasoning.enabled and caps.thinking:
        body["reasoning"] = {"effort": _effort(req.reasoning), "summary": "auto"}
        body["include"] = [ENCRYPTED_REASONING]
        body["store"] = False
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
