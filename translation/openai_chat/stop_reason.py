"""Chat ``finish_reason`` ⇄ IR :class:`~translation.ir.FinishReason`, one table each way."""

from __future__ import annotations

from .. import ir

# https://platform.openai.com/docs/api-reference/chat/object (choices[].finish_reason), plus values
# seen from compatible upstreams: OpenRouter "error", Anthropic-fronting layers "end_turn"/"max_tokens"/"tool_use".
FROM_CHAT: dict[str, ir.FinishReason] = {
    "stop": ir.FinishReason.STOP,
    "length": ir.FinishReason.LENGTH,
    "tool_calls": ir.FinishReason.TOOL_CALLS,
    "function_call": ir.FinishReason.TOOL_CALLS,
    "content_filter": ir.FinishReason.CONTENT_FILTER,
    "error": ir.FinishReason.ERROR,
    "end_turn": ir.FinishReason.STOP,
    "max_tokens": ir.FinishReason.LENGTH,
    "tool_use": ir.FinishReason.TOOL_CALLS,
}
FROM_CHAT_DEFAULT = ir.FinishReason.STOP

# The values a Chat client may receive; PAUSE (Anthropic pause_turn) has no Chat equivalent.
TO_CHAT: dict[ir.FinishReason, str] = {
    ir.FinishReason.STOP: "stop",
    ir.FinishReason.LENGTH: "length",
    ir.FinishReason.TOOL_CALLS: "tool_calls",
    ir.FinishReason.CONTENT_FILTER: "content_filter",
    ir.FinishReason.PAUSE: "stop",
    ir.FinishReason.ERROR: "error",
}
TO_CHAT_DEFAULT = "stop"
# Raw values re-used verbatim for a Chat client (the official ones only).
_OWN_VALUES = frozenset({"stop", "length", "tool_calls", "function_call", "content_filter"})


def from_chat(value: str | None) -> ir.Finish:
    """The IR finish for an upstream ``finish_reason``; unknown values map to STOP, raw kept."""

    if value is None:
        return ir.Finish(FROM_CHAT_DEFAULT)
    return ir.Finish(FROM_CHAT.get(value, FROM_CHAT_DEFAULT), raw=value)


def to_chat(finish: ir.Finish) -> str:
    """The ``finish_reason`` a Chat client sees: the raw value when it is ours and agrees."""

    raw = finish.raw
    if raw is not None and raw in _OWN_VALUES and FROM_CHAT.get(raw) == finish.reason:
        return raw
    return TO_CHAT.get(finish.reason, TO_CHAT_DEFAULT)
