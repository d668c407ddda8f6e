"""Anthropic ``stop_reason`` ⇄ IR finish reason: one table each way, with defaults."""

from __future__ import annotations

from typing import Any

from .. import ir

# https://docs.anthropic.com/en/api/messages#response-stop-reason
FROM_ANTHROPIC: dict[str, ir.FinishReason] = {
    "end_turn": ir.FinishReason.STOP,
    "stop_sequence": ir.FinishReason.STOP,
    "max_tokens": ir.FinishReason.LENGTH,
    "model_context_window_exceeded": ir.FinishReason.LENGTH,
    "tool_use": ir.FinishReason.TOOL_CALLS,
    "refusal": ir.FinishReason.REFUSAL,
    "pause_turn": ir.FinishReason.PAUSE,
}
DEFAULT_REASON = ir.FinishReason.STOP

TO_ANTHROPIC: dict[ir.FinishReason, str] = {
    ir.FinishReason.STOP: "end_turn",
    ir.FinishReason.LENGTH: "max_tokens",
    ir.FinishReason.TOOL_CALLS: "tool_use",
    ir.FinishReason.CONTENT_FILTER: "refusal",
    ir.FinishReason.REFUSAL: "refusal",
    ir.FinishReason.PAUSE: "pause_turn",
    # Anthropic has no stop reason for a failure; failures end with an error event.
    ir.FinishReason.ERROR: "end_turn",
}
DEFAULT_STOP_REASON = "end_turn"


def to_ir(stop_reason: str | None, stop_sequence: str | None = None) -> ir.Finish:
    """An upstream ``stop_reason``; unknown values become STOP and keep ``raw``."""

    reason = FROM_ANTHROPIC.get(stop_reason or "", DEFAULT_REASON)
    return ir.Finish(reason=reason, raw=stop_reason, stop_sequence=stop_sequence)


def from_ir(finish: ir.Finish | None) -> str:
    """Re-use the upstream's own value when it is Anthropic's and means the same."""

    if finish is None:
        return DEFAULT_STOP_REASON
    if finish.raw is not None and FROM_ANTHROPIC.get(finish.raw) == finish.reason:
        return finish.raw
    return TO_ANTHROPIC.get(finish.reason, DEFAULT_STOP_REASON)


def stop_sequence_of(finish: ir.Finish | None, stop_reason: str) -> str | None:
    """Anthropic reports the matched sequence only with ``stop_reason: stop_sequence``."""

    if finish is None or stop_reason != "stop_sequence":
        return None
    return finish.stop_sequence


def stop_details(raw: dict[str, Any] | None, explanation: str) -> dict[str, Any] | None:
    """``stop_details`` of a refusal: the upstream's own when it was Anthropic's, else one
    carrying the refusal message as its explanation."""

    if raw is not None:
        return raw
    if not explanation:
        return None
    return {"type": "refusal", "category": None, "explanation": explanation}
