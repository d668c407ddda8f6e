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
    # A refusal with no refusal message (Anthropic's classifier stopped the answer): the
    # content was cut by a policy filter. One with a message says so in ``refusal`` and stops.
    ir.FinishReason.REFUSAL: "content_filter",
}
TO_CHAT_DEFAULT = "stop"
# Raw values re-used verbatim for a Chat client (the official ones only).
_OWN_VALUES = frozenset({"stop", "length", "tool_calls", "function_call", "content_filter"})


def from_chat(value: str | None, refused: bool = False) -> ir.Finish:
    """The IR finish for an upstream ``finish_reason``; unknown values map to STOP, raw kept.
    A turn that stopped after a ``refusal`` message is a REFUSAL (Chat says only "stop")."""

    reason = FROM_CHAT_DEFAULT if value is None else FROM_CHAT.get(value, FROM_CHAT_DEFAULT)
    if refused and reason is ir.FinishReason.STOP:
        reason = ir.FinishReason.REFUSAL
    return ir.Finish(reason, raw=value)


def to_chat(finish: ir.Finish, refusal_shown: bool = False) -> str:
    """The ``finish_reason`` a Chat client sees: the raw value when it is ours and agrees.
    ``refusal_shown``: the client got a ``refusal`` message, which is the signal itself."""

    if finish.reason is ir.FinishReason.REFUSAL and refusal_shown:
        return "stop"
    raw = finish.raw
    if raw is not None and raw in _OWN_VALUES and FROM_CHAT.get(raw) == finish.reason:
        return raw
    return TO_CHAT.get(finish.reason, TO_CHAT_DEFAULT)
