"""Conversation repairs every builder applies before talking to an upstream.

Clients that truncate history leave assistant tool calls without results;
both OpenAI and Anthropic reject such a conversation with a 400. We answer the
orphan with a synthetic error result instead.
"""

from __future__ import annotations

from . import ir

ORPHAN_RESULT_TEXT = "[Tool result unavailable - conversation history was truncated]"


def complete_orphan_tool_calls(messages: list[ir.Message]) -> list[ir.Message]:
    messages = list(messages)
    out: list[ir.Message] = []
    for i, msg in enumerate(messages):
        out.append(msg)
        if msg.role != "assistant":
            continue
        call_ids = [p.id for p in msg.parts if isinstance(p, ir.ToolCallPart)]
        if not call_ids:
            continue
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        answered = set()
        if nxt is not None and nxt.role == "user":
            answered = {p.tool_call_id for p in nxt.parts if isinstance(p, ir.ToolResultPart)}
        missing = [cid for cid in call_ids if cid not in answered]
        if not missing:
            continue
        # The last turn of a conversation may legitimately end on tool calls only
        # when nothing follows; a trailing assistant message is a prefill, not an orphan.
        if nxt is None:
            continue
        synthetic: list[ir.Part] = [
            ir.ToolResultPart(tool_call_id=cid, content=[ir.TextPart(ORPHAN_RESULT_TEXT)], is_error=True)
            for cid in missing
        ]
        if nxt.role == "user":
            messages[i + 1] = ir.Message("user", synthetic + list(nxt.parts))
        else:
            out.append(ir.Message("user", synthetic))
    return out
