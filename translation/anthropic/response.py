"""A Messages JSON response ⇄ IR response."""

from __future__ import annotations

import copy
from typing import Any, assert_never

from .. import ids, ir, sse
from ..protocol import EncodeContext
from . import citations, stop_reason, usage
from .wire import NAME, parse_arguments


def parse_response(body: Any) -> ir.Response:
    """Upstream ``message`` JSON → IR. Server-side tool blocks are kept verbatim for an
    Anthropic client; a refusal's ``stop_details.explanation`` becomes a refusal block."""

    if isinstance(body, (bytes, bytearray, str)):
        try:
            body = sse.loads(bytes(body) if isinstance(body, bytearray) else body)
        except ValueError as exc:
            raise ir.DecodeError(f"upstream body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ir.DecodeError("upstream body is not a JSON object")
    content = body.get("content")
    if not isinstance(content, list):
        raise ir.DecodeError("upstream message has no content array")
    resp = ir.Response(
        id=body.get("id") if isinstance(body.get("id"), str) else None,
        model=body.get("model") if isinstance(body.get("model"), str) else None,
        usage=usage.to_ir(body.get("usage")),
    )
    for i, item in enumerate(content):
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise ir.DecodeError(f"content[{i}] is not a typed block")
        resp.blocks.append(block_from_wire(item))
    raw = body.get("stop_reason")
    details = body.get("stop_details")
    explanation = details.get("explanation") if isinstance(details, dict) else None
    if raw == "refusal" and isinstance(explanation, str) and explanation:
        resp.blocks.append(ir.Block(kind="refusal", text=explanation, raw=copy.deepcopy(details), raw_protocol=NAME))
    seq = body.get("stop_sequence")
    resp.finish = stop_reason.to_ir(raw if isinstance(raw, str) else None, seq if isinstance(seq, str) else None)
    return resp


def block_from_wire(item: dict[str, Any]) -> ir.Block:
    match item["type"]:
        case "text":
            text = _text(item.get("text"))
            cited = citations.from_wire_list(item.get("citations"), len(text))
            return ir.Block(kind="text", text=text, citations=cited)
        case "thinking":
            return ir.Block(kind="reasoning", text=_text(item.get("thinking")),
                            signature=_text(item.get("signature")) or None)
        case "redacted_thinking":
            return ir.Block(kind="reasoning", redacted=_text(item.get("data")))
        case "tool_use":
            arguments = item.get("input")
            return ir.Block(kind="tool_call", id=_text(item.get("id")), name=_text(item.get("name")),
                            text=sse.dumps(arguments if arguments is not None else {}))
        case _:
            # server_tool_use, *_tool_result, mcp_*, container_upload, compaction, …
            return ir.Block(kind="server_tool", raw=copy.deepcopy(item), raw_protocol=NAME)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def render_response(resp: ir.Response, ctx: EncodeContext) -> dict[str, Any]:
    content = [b for b in (block_to_wire(block) for block in resp.blocks) if b is not None]
    reason = stop_reason.from_ir(resp.finish)
    refusals = [b for b in resp.blocks if b.kind == "refusal"]
    raw = next((b.raw for b in refusals if b.raw_protocol == NAME and b.raw is not None), None)
    details = stop_reason.stop_details(raw, "".join(b.text for b in refusals))
    return {
        "id": ctx.id or ids.new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": stop_reason.stop_sequence_of(resp.finish, reason),
        "usage": usage.from_ir(resp.usage),
        **({"stop_details": details} if details is not None else {}),
    }


def block_to_wire(block: ir.Block) -> dict[str, Any] | None:
    """One content block as an Anthropic client sees it; None when it has no Anthropic shape."""

    match block.kind:
        case "refusal":
            return None  # the message's stop_details
        case "text":
            wire: dict[str, Any] = {"type": "text", "text": block.text}
            cited = [c for c in (citations.to_wire(d, block.text) for d in block.citations) if c is not None]
            if cited:
                wire["citations"] = cited
            return wire
        case "reasoning":
            if block.redacted is not None:
                return {"type": "redacted_thinking", "data": block.redacted}
            if not block.text and not block.signature:
                return None  # nothing to show, and unsigned empty thinking cannot be sent back
            return {"type": "thinking", "thinking": block.text, "signature": block.signature or ""}
        case "tool_call":
            return {"type": "tool_use", "id": block.id or ids.new_id("toolu_"), "name": block.name or "",
                    "input": parse_arguments(block.text)}
        case "server_tool":
            if block.raw_protocol == NAME and block.raw is not None:
                return copy.deepcopy(block.raw)
            return None
        case _:
            assert_never(block.kind)

