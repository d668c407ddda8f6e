import pytest

from translation import ir
from translation.responses.stop_reason import finish_from_status, incomplete_reason_for

R = ir.FinishReason


@pytest.mark.parametrize("status, reason, calls, expected, raw", [
    ("completed", None, False, R.STOP, "completed"),
    ("completed", None, True, R.TOOL_CALLS, "completed"),
    ("incomplete", "max_output_tokens", False, R.LENGTH, "max_output_tokens"),
    ("incomplete", "content_filter", True, R.CONTENT_FILTER, "content_filter"),
    ("incomplete", "max_messages", False, R.LENGTH, "max_messages"),
    ("incomplete", None, False, R.LENGTH, "incomplete"),
])
def test_status_maps_to_finish_and_keeps_raw(status, reason, calls, expected, raw):
    finish = finish_from_status(status, reason, calls)
    assert finish == ir.Finish(expected, raw=raw)


@pytest.mark.parametrize("status", ["in_progress", "queued", "failed", None, 3])
def test_unfinished_or_failed_status_has_no_finish(status):
    assert finish_from_status(status, None, False) is None


@pytest.mark.parametrize("finish, expected", [
    (ir.Finish(R.STOP), None),
    (ir.Finish(R.TOOL_CALLS, raw="tool_use"), None),
    (ir.Finish(R.PAUSE, raw="pause_turn"), None),
    (ir.Finish(R.LENGTH, raw="max_tokens"), "max_output_tokens"),
    (ir.Finish(R.LENGTH, raw="max_output_tokens"), "max_output_tokens"),
    (ir.Finish(R.CONTENT_FILTER, raw="refusal"), "content_filter"),
    (ir.Finish(R.CONTENT_FILTER, raw="max_output_tokens"), "content_filter"),
])
def test_incomplete_reason_reuses_raw_only_when_it_means_the_same(finish, expected):
    assert incomplete_reason_for(finish) == expected
