import pytest

from translation import ir
from translation.openai_chat import stop_reason

F = ir.FinishReason


@pytest.mark.parametrize(("raw", "reason"), [
    ("stop", F.STOP), ("length", F.LENGTH), ("tool_calls", F.TOOL_CALLS),
    ("function_call", F.TOOL_CALLS), ("content_filter", F.CONTENT_FILTER), ("error", F.ERROR),
])
def test_maps_every_documented_finish_reason_and_keeps_raw(raw: str, reason: F) -> None:
    finish = stop_reason.from_chat(raw)
    assert finish.reason is reason
    assert finish.raw == raw


def test_unknown_finish_reason_is_stop_with_raw_kept() -> None:
    finish = stop_reason.from_chat("eos_token")
    assert finish.reason is F.STOP and finish.raw == "eos_token"


def test_missing_finish_reason_is_stop_without_raw() -> None:
    assert stop_reason.from_chat(None) == ir.Finish(F.STOP)


@pytest.mark.parametrize(("reason", "value"), [
    (F.STOP, "stop"), (F.LENGTH, "length"), (F.TOOL_CALLS, "tool_calls"),
    (F.CONTENT_FILTER, "content_filter"), (F.ERROR, "error"),
])
def test_renders_each_reason(reason: F, value: str) -> None:
    assert stop_reason.to_chat(ir.Finish(reason)) == value


def test_pause_has_no_chat_value_and_renders_as_stop() -> None:
    assert stop_reason.to_chat(ir.Finish(F.PAUSE, raw="pause_turn")) == "stop"


def test_own_raw_value_is_reused_when_it_agrees() -> None:
    assert stop_reason.to_chat(ir.Finish(F.TOOL_CALLS, raw="function_call")) == "function_call"


def test_foreign_or_disagreeing_raw_value_is_not_reused() -> None:
    assert stop_reason.to_chat(ir.Finish(F.STOP, raw="end_turn")) == "stop"
    assert stop_reason.to_chat(ir.Finish(F.LENGTH, raw="max_tokens")) == "length"
    assert stop_reason.to_chat(ir.Finish(F.STOP, raw="length")) == "stop"
    assert stop_reason.to_chat(ir.Finish(F.STOP, raw="eos_token")) == "stop"
