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


def defer_system_messages(messages: list[ir.Message], *, after_user_only: bool) -> list[ir.Message]:
    """Move each mid-conversation system message to where the target accepts it.

    A system message may never sit between an assistant turn's tool calls and the
    results that answer them (OpenAI wants ``tool`` messages right after the call,
    Anthropic the ``tool_result`` blocks in the very next user turn); with
    ``after_user_only`` (Anthropic's placement rule for ``role: "system"``) it must
    follow a user turn. A misplaced one moves to just after the next user turn, which
    still comes before the model's next answer; with no user turn left it stays last.
    """

    out: list[ir.Message] = []
    waiting: list[ir.Message] = []
    for msg in messages:
        if msg.role == "system":
            prev = out[-1] if out else None
            if waiting or not _system_may_follow(prev, after_user_only):
                waiting.append(msg)
            else:
                out.append(msg)
            continue
        out.append(msg)
        if msg.role == "user" and waiting:
            out.extend(waiting)
            waiting = []
    return out + waiting


def _system_may_follow(prev: ir.Message | None, after_user_only: bool) -> bool:
    if prev is None:
        return not after_user_only
    if prev.role == "assistant" and any(isinstance(p, ir.ToolCallPart) for p in prev.parts):
        return False
    return prev.role in ("user", "system") or not after_user_only
