"""A Messages JSON response ⇄ IR response."""

from __future__ import annotations

import copy
from typing import Any, assert_never

from .. import ids, ir, sse
from ..protocol import EncodeContext
from . import stop_reason, usage
from .wire import NAME, parse_arguments


def parse_response(body: Any) -> ir.Response:
    """Upstream ``message`` JSON → IR. Citations have no IR slot (dropped);
    server-side tool blocks are kept verbatim for an Anthropic client."""

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
    seq = body.get("stop_sequence")
    resp.finish = stop_reason.to_ir(raw if isinstance(raw, str) else None, seq if isinstance(seq, str) else None)
    return resp


def block_from_wire(item: dict[str, Any]) -> ir.Block:
    match item["type"]:
        case "text":
            return ir.Block(kind="text", text=_text(item.get("text")))
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
    return {
        "id": ctx.id or ids.new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": stop_reason.stop_sequence_of(resp.finish, reason),
        "usage": usage.from_ir(resp.usage),
    }


def block_to_wire(block: ir.Block) -> dict[str, Any] | None:
    """One content block as an Anthropic client sees it; None when it has no Anthropic shape."""

    match block.kind:
        case "text":
            return {"type": "text", "text": block.text}
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

