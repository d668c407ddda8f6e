"""Non-streaming: upstream ``chat.completion`` → :class:`ir.Response`, and back for a client."""

from __future__ import annotations

from typing import Any

from .. import block_data, ids, ir, sse
from ..protocol import EncodeContext
from . import stop_reason, url_citations
from .errors import error_from_object
from .usage import parse_usage, render_usage


def parse_response(body: Any) -> ir.Response:
    """Only ``choices[0]`` is served. Raises :class:`ir.DecodeError` on a body that is
    not a chat completion; an ``{"error": …}`` body becomes ``Response.error``."""

    if isinstance(body, (bytes, str)):
        try:
            body = sse.loads(body)
        except ValueError as exc:
            raise ir.DecodeError(f"upstream body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ir.DecodeError("upstream body is not a JSON object")
    resp = ir.Response(id=_nonempty(body.get("id")), model=_nonempty(body.get("model")))
    usage = parse_usage(body.get("usage"))
    if usage is not None:
        resp.usage = usage
    if body.get("error") is not None and not body.get("choices"):
        resp.error = error_from_object(body["error"])
        return resp
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ir.DecodeError("upstream chat completion has no choices")
    choice = choices[0]
    message = choice.get("message") or {}
    if not isinstance(message, dict):
        raise ir.DecodeError("choices[0].message is not an object")
    logprobs = choice.get("logprobs")
    resp.blocks = _blocks(message, logprobs if isinstance(logprobs, dict) else {})
    reason = choice.get("finish_reason")
    refused = any(b.kind == "refusal" for b in resp.blocks)
    resp.finish = stop_reason.from_chat(reason if isinstance(reason, str) else None, refused=refused)
    return resp


def _nonempty(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _text(value: Any) -> str:
    """``content`` is a string, or (Mistral and others) an array of text parts."""

    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(p.get("text", "") for p in value
                       if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str))
    return ""


def _blocks(message: dict[str, Any], logprobs: dict[str, Any]) -> list[ir.Block]:
    blocks: list[ir.Block] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        blocks.append(ir.Block("reasoning", text=reasoning))
    text = _text(message.get("content"))
    notes = message.get("annotations")
    cited = [c for c in (url_citations.to_ir(n, 0) for n in (notes if isinstance(notes, list) else []))
             if c is not None]
    if text or cited:
        blocks.append(ir.Block("text", text=text, citations=cited,
                               logprobs=block_data.token_logprobs(logprobs.get("content"))))
    refusal = _text(message.get("refusal"))
    if refusal:
        blocks.append(ir.Block("refusal", text=refusal, logprobs=block_data.token_logprobs(logprobs.get("refusal"))))
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            raise ir.DecodeError("a tool call is not an object")
        function = call.get("function") or {}
        call_id = call.get("id")
        blocks.append(ir.Block("tool_call", text=_arguments(function.get("arguments")),
                               id=call_id if isinstance(call_id, str) and call_id else ids.new_id("call_"),
                               name=str(function.get("name") or "")))
    legacy = message.get("function_call")
    if isinstance(legacy, dict) and isinstance(legacy.get("name"), str):
        blocks.append(ir.Block("tool_call", text=_arguments(legacy.get("arguments")),
                               id=legacy["name"], name=legacy["name"]))
    return blocks


def _arguments(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return sse.dumps(value)  # some compatible upstreams send the object itself


def render_response(resp: ir.Response, ctx: EncodeContext) -> dict[str, Any]:
    """The client's ``chat.completion``; text, refusal and reasoning blocks are concatenated
    the way a streaming client would accumulate them (citations re-indexed into the whole
    content); server_tool blocks are dropped."""

    texts = [b for b in resp.blocks if b.kind == "text"]
    refusals = [b for b in resp.blocks if b.kind == "refusal"]
    text = "".join(b.text for b in texts)
    refusal = "".join(b.text for b in refusals)
    reasoning = "".join(b.text for b in resp.blocks if b.kind == "reasoning")
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": refusal or None}
    if reasoning:
        message["reasoning_content"] = reasoning
    notes: list[ir.JSON] = []
    offset = 0
    for block in texts:
        notes.extend(n for n in (url_citations.to_wire(c, offset) for c in block.citations) if n is not None)
        offset += len(block.text)
    if notes:
        message["annotations"] = notes
    calls = [{"id": b.id or ids.new_id("call_"), "type": "function",
              "function": {"name": b.name or "", "arguments": b.text}}
             for b in resp.blocks if b.kind == "tool_call"]
    if calls:
        message["tool_calls"] = calls
    finish = resp.finish or ir.Finish(ir.FinishReason.STOP)
    content_lp = [t for b in texts for t in b.logprobs]
    refusal_lp = [t for b in refusals for t in b.logprobs]
    logprobs = {"content": content_lp or None, "refusal": refusal_lp or None} if content_lp or refusal_lp else None
    return {
        "id": ctx.id or ids.new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": ctx.created,
        "model": ctx.model,
        "choices": [{"index": 0, "message": message, "logprobs": logprobs,
                     "finish_reason": stop_reason.to_chat(finish, bool(refusal))}],
        "usage": render_usage(resp.usage),
    }
