"""How a stream ended, told from its events alone (``gateway.exchange.outcome``): no socket, no loop."""

from __future__ import annotations

from accounts.outcomes import ErrorClass
from gateway.exchange.outcome import StreamOutcome
from translation import ir


def _never() -> int:
    raise AssertionError("a stream whose upstream reported its usage needs no estimate")


def test_a_stream_the_upstream_finished_is_charged_what_it_reported() -> None:
    outcome = StreamOutcome()
    outcome.feed([ir.MessageStart(id="msg_1"), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "Hello")])
    outcome.feed([ir.BlockStop(0), ir.Usage(input_tokens=12, output_tokens=3), ir.Finish(ir.FinishReason.STOP)])

    assert outcome.reported and not outcome.cut
    assert outcome.usage(_never) == ir.Usage(input_tokens=12, output_tokens=3)
    assert outcome.finish is not None and outcome.finish.reason is ir.FinishReason.STOP
    assert outcome.upstream_id == "msg_1"
    assert outcome.error_class == ErrorClass.NONE


def test_a_stream_cut_before_its_usage_is_charged_an_estimate() -> None:
    outcome = StreamOutcome()
    outcome.feed([ir.MessageStart(id="chatcmpl-1"), ir.BlockStart(0, "text")])
    outcome.feed([ir.BlockDelta(0, "text", "a" * 40), ir.BlockDelta(0, "text", "b")])

    assert outcome.cut
    # The output: a quarter of the characters read (more than one token per delta here); the input: the caller's.
    assert outcome.usage(lambda: 500) == ir.Usage(input_tokens=500, output_tokens=10)
    assert outcome.finish is None


def test_a_cut_stream_keeps_the_input_the_upstream_gave_at_its_start() -> None:
    outcome = StreamOutcome()
    outcome.feed([ir.MessageStart(id="msg_2", usage=ir.Usage(input_tokens=70, output_tokens=1))])
    outcome.feed([ir.BlockStart(0, "text"), *[ir.BlockDelta(0, "text", "x") for _ in range(5)]])

    usage = outcome.usage(lambda: 9999)
    assert (usage.input_tokens, usage.output_tokens) == (70, 5)


def test_a_finish_without_the_output_count_is_still_a_cut_stream() -> None:
    outcome = StreamOutcome()
    outcome.feed([ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "hi"), ir.Finish(ir.FinishReason.STOP)])

    assert outcome.cut
    assert outcome.finish is not None


def test_the_error_a_stream_ended_with_names_its_class() -> None:
    broke = StreamOutcome()
    broke.feed([ir.transport_error(ir.TransportFailure.TIMEOUT, "upstream stalled past its idle timeout", 504)])
    assert broke.error_class == ErrorClass.UPSTREAM_TIMEOUT

    reported = StreamOutcome()
    reported.feed([ir.Error("overloaded", error_type="overloaded_error", status=529)])
    assert reported.error_class == ErrorClass.UPSTREAM_ERROR

    stopping = StreamOutcome()
    stopping.feed([ir.Error("The gateway is stopping", error_type="overloaded_error", status=503)], stopping=True)
    assert stopping.error_class == ErrorClass.SHUTTING_DOWN


def test_a_client_that_leaves_after_an_error_keeps_the_error_and_a_gateway_failure_overrides_it() -> None:
    outcome = StreamOutcome()
    outcome.client_left()
    assert outcome.error_class == ErrorClass.CLIENT_DISCONNECTED

    errored = StreamOutcome()
    errored.feed([ir.transport_error(ir.TransportFailure.DISCONNECTED, "upstream connection lost")])
    errored.client_left()
    assert errored.error_class == ErrorClass.UPSTREAM_DISCONNECTED
    errored.gateway_failed()
    assert errored.error_class == ErrorClass.INTERNAL
