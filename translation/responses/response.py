"""A non-streamed Responses body, both ways: upstream JSON → IR, IR → client JSON."""

from __future__ import annotations

from typing import Any

from .. import ir, sse
from ..ids import new_id
from ..protocol import EncodeContext
from . import content, items
from .envelope import response_object
from .errors import failed_error, response_error
from .stop_reason import finish_from_status, incomplete_reason_for
from .usage import parse_usage, render_usage

RAW_PROTOCOL = "responses"


def reasoning_text(item: dict[str, Any]) -> str:
    """Summary parts joined by a blank line; raw reasoning text when there is no summary."""

    for key, part_type in (("summary", "summary_text"), ("content", "reasoning_text")):
        parts = item.get(key)
        if isinstance(parts, list):
            texts = [p["text"] for p in parts
                     if isinstance(p, dict) and p.get("type") == part_type and isinstance(p.get("text"), str)]
            if texts:
                return "\n\n".join(texts)
    return ""


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def item_blocks(item: dict[str, Any]) -> list[ir.Block]:
    """The IR blocks one output item stands for."""

    match item.get("type"):
        case "message":
            return content.blocks_of(item)
        case "reasoning":
            return [ir.Block(kind="reasoning", text=reasoning_text(item), id=_str_or_none(item.get("id")),
                             signature=_str_or_none(item.get("encrypted_content")))]
        case "function_call":
            args = item.get("arguments")
            return [ir.Block(kind="tool_call", text=args if isinstance(args, str) else "",
                             id=_str_or_none(item.get("call_id")), name=_str_or_none(item.get("name")))]
        case _:
            return [ir.Block(kind="server_tool", id=_str_or_none(item.get("id")),
                             name=_str_or_none(item.get("name")) or _str_or_none(item.get("type")),
                             raw=item, raw_protocol=RAW_PROTOCOL)]


def parse_response(body: Any) -> ir.Response:
    if isinstance(body, (bytes, bytearray, str)):
        try:
            body = sse.loads(bytes(body) if isinstance(body, bytearray) else body)
        except ValueError as exc:
            raise ir.DecodeError(f"response body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ir.DecodeError("response body is not a JSON object")
    output = body.get("output")
    if output is not None and not isinstance(output, list):
        raise ir.DecodeError("response output is not an array")
    resp = ir.Response(id=_str_or_none(body.get("id")), model=_str_or_none(body.get("model")))
    has_calls = False
    for item in output or []:
        if not isinstance(item, dict):
            raise ir.DecodeError("response output item is not an object")
        has_calls = has_calls or item.get("type") == "function_call"
        resp.blocks.extend(item_blocks(item))
    resp.usage = parse_usage(body.get("usage")) or ir.Usage()
    status = body.get("status")
    if status == "failed" or (status is None and isinstance(body.get("error"), dict)):
        resp.error = failed_error(body)
        return resp
    details = body.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    refused = any(b.kind == "refusal" for b in resp.blocks)
    resp.finish = finish_from_status(status or "completed", reason, has_calls, refused)
    return resp


def _render_block(block: ir.Block, client_tools: Any = None) -> dict[str, Any] | None:
    match block.kind:
        case "text" | "refusal":
            return content.message(items.message_id(), [content.part(block)])
        case "reasoning":
            return items.reasoning(items.reasoning_id(block.id), block.text, block.signature)
        case "tool_call":
            return items.function_call(items.function_call_id(), items.call_id(block.id),
                                       block.name or "", block.text, client_tools=client_tools)
        case "server_tool":
            if block.raw_protocol == RAW_PROTOCOL and block.raw is not None:
                return block.raw
            return None
    return None


def render_response(resp: ir.Response, ctx: EncodeContext) -> dict[str, Any]:
    tools = ctx.body.get("tools")
    output = [item for item in (_render_block(b, tools) for b in resp.blocks) if item is not None]
    response_id = ctx.id or new_id("resp_")
    usage = render_usage(resp.usage)
    if resp.error is not None:
        return response_object(ctx, response_id, "failed", output, usage,
                               error=response_error(resp.error))
    finish = resp.finish or ir.Finish(ir.FinishReason.STOP)
    if finish.reason == ir.FinishReason.ERROR:
        err = ir.Error(message="upstream finished with an error", status=502)
        return response_object(ctx, response_id, "failed", output, usage, error=response_error(err))
    reason = incomplete_reason_for(finish, any(b.kind == "refusal" for b in resp.blocks))
    return response_object(ctx, response_id, "incomplete" if reason else "completed", output, usage,
                           incomplete_reason=reason)
