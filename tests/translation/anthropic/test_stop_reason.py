import pytest

from translation import ir
from translation.anthropic import stop_reason

R = ir.FinishReason


@pytest.mark.parametrize("raw, reason", [
    ("end_turn", R.STOP), ("stop_sequence", R.STOP), ("max_tokens", R.LENGTH),
    ("model_context_window_exceeded", R.LENGTH), ("tool_use", R.TOOL_CALLS),
    ("refusal", R.REFUSAL), ("pause_turn", R.PAUSE),
])
def test_maps_every_documented_stop_reason_and_keeps_raw(raw: str, reason: R) -> None:
    finish = stop_reason.to_ir(raw)
    assert finish.reason == reason and finish.raw == raw


def test_unknown_stop_reason_becomes_stop_keeping_raw() -> None:
    finish = stop_reason.to_ir("brand_new_reason")
    assert finish.reason == R.STOP and finish.raw == "brand_new_reason"


def test_missing_stop_reason_is_stop() -> None:
    assert stop_reason.to_ir(None).reason == R.STOP


@pytest.mark.parametrize("reason, raw", [
    (R.STOP, "end_turn"), (R.LENGTH, "max_tokens"), (R.TOOL_CALLS, "tool_use"),
    (R.CONTENT_FILTER, "refusal"), (R.REFUSAL, "refusal"), (R.PAUSE, "pause_turn"), (R.ERROR, "end_turn"),
])
def test_ir_reason_maps_through_the_table(reason: R, raw: str) -> None:
    assert stop_reason.from_ir(ir.Finish(reason)) == raw


@pytest.mark.parametrize("raw, reason", [
    ("stop_sequence", R.STOP), ("model_context_window_exceeded", R.LENGTH), ("refusal", R.REFUSAL),
])
def test_own_raw_value_survives_anthropic_to_anthropic(raw: str, reason: R) -> None:
    assert stop_reason.from_ir(ir.Finish(reason, raw=raw)) == raw


def test_foreign_raw_value_is_not_reused() -> None:
    # OpenAI's "length" is not an Anthropic value; the IR reason decides.
    assert stop_reason.from_ir(ir.Finish(R.LENGTH, raw="length")) == "max_tokens"
    # An Anthropic value that disagrees with the reason is not reused either.
    assert stop_reason.from_ir(ir.Finish(R.TOOL_CALLS, raw="end_turn")) == "tool_use"


def test_no_finish_is_end_turn() -> None:
    assert stop_reason.from_ir(None) == "end_turn"


def test_stop_sequence_only_reported_with_stop_sequence_reason() -> None:
    finish = ir.Finish(R.STOP, raw="stop_sequence", stop_sequence="###")
    assert stop_reason.stop_sequence_of(finish, "stop_sequence") == "###"
    assert stop_reason.stop_sequence_of(ir.Finish(R.STOP, stop_sequence="###"), "end_turn") is None
