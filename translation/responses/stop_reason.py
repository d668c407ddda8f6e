"""Responses ``status`` / ``incomplete_details.reason`` ⇄ :class:`ir.FinishReason`.

Responses has no finish reason of its own: a response is ``completed`` (with or
without function calls), ``incomplete`` for a stated reason, or ``failed``.
"""

from __future__ import annotations

from .. import ir

# https://platform.openai.com/docs/api-reference/responses/object (incomplete_details.reason)
INCOMPLETE_REASONS: dict[str, ir.FinishReason] = {
    "max_output_tokens": ir.FinishReason.LENGTH,
    "content_filter": ir.FinishReason.CONTENT_FILTER,
}
# An incomplete response for a reason we do not know was still cut short.
DEFAULT_INCOMPLETE = ir.FinishReason.LENGTH

# The reverse direction: the incomplete reason that stands for an IR reason.
_INCOMPLETE_FOR: dict[ir.FinishReason, str] = {
    ir.FinishReason.LENGTH: "max_output_tokens",
    ir.FinishReason.CONTENT_FILTER: "content_filter",
    # A refusal without a refusal message (Anthropic's classifier cut the answer); one with a
    # message is a completed response whose refusal part says so.
    ir.FinishReason.REFUSAL: "content_filter",
}


def finish_from_status(status: object, incomplete_reason: object, has_tool_calls: bool,
                       refused: bool = False) -> ir.Finish | None:
    """The IR finish of a response with this ``status``; None while it is not finished.
    A completed response with a refusal part is a REFUSAL."""

    if status == "completed":
        reason = ir.FinishReason.TOOL_CALLS if has_tool_calls else ir.FinishReason.STOP
        if refused and not has_tool_calls:
            reason = ir.FinishReason.REFUSAL
        return ir.Finish(reason, raw="completed")
    if status == "incomplete":
        raw = incomplete_reason if isinstance(incomplete_reason, str) else None
        return ir.Finish(INCOMPLETE_REASONS.get(raw or "", DEFAULT_INCOMPLETE), raw=raw or "incomplete")
    return None


def incomplete_reason_for(finish: ir.Finish, refusal_shown: bool = False) -> str | None:
    """``incomplete_details.reason`` for ``finish``; None when the response is simply completed.

    The upstream's own value is kept when it is a Responses reason meaning the same thing.
    ``refusal_shown``: the client got a refusal part, which is the signal itself.
    """

    if finish.reason is ir.FinishReason.REFUSAL and refusal_shown:
        return None
    expected = _INCOMPLETE_FOR.get(finish.reason)
    if expected is None:
        return None
    if finish.raw is not None and INCOMPLETE_REASONS.get(finish.raw) == finish.reason:
        return finish.raw
    return expected
