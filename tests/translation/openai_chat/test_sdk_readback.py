"""The encoder's bytes as the official openai SDK reads them: same text, reasoning,
tool calls, finish reason and usage as the fold of the IR events fed in; the same
for render_response through ChatCompletion.model_validate."""

from dataclasses import replace

import pytest
from openai.types.chat import ChatCompletion

from tests.fixtures.recorded_loader import Recording, recordings
from tests.translation.summary import Summary, carried_by, summary_of
from translation import fold, ir
from translation.openai_chat import parse_response, render_response
from translation.protocol import EncodeContext

from .helpers import decode, encode
from .sdk_readback import summary_from_json, summary_from_stream

F = ir.FinishReason
CTX = EncodeContext(model="client-model", id="chatcmpl-fixed", created=1700000000)


def expected(resp: ir.Response) -> Summary:
    """What a Chat client can see of ``resp``: no signatures, no PAUSE."""

    s = carried_by("openai_chat", summary_of(resp))
    s.signatures = []
    if s.finish is F.PAUSE:
        s.finish = F.STOP
    return s


def assert_reads_back(events: list[ir.Event]) -> None:
    resp = fold.fold(events)
    want = expected(resp)
    got = summary_from_stream(encode(events, CTX))
    if want.error is not None:
        assert (got.error, got.text, got.reasoning, got.tool_calls) == (
            want.error, want.text, want.reasoning, want.tool_calls)
        return
    assert got == want
    rendered = render_response(resp, CTX)
    ChatCompletion.model_validate(rendered)
    # a JSON body always carries usage: unknown counts are rendered as 0
    assert summary_from_json(rendered) == replace(want, input_tokens=want.input_tokens or 0,
                                                  output_tokens=want.output_tokens or 0)


HAND_BUILT: dict[str, list[ir.Event]] = {
    "text": [ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "Hello"),
             ir.BlockDelta(0, "text", ", world"), ir.BlockStop(0), ir.Finish(F.STOP),
             ir.Usage(input_tokens=5, output_tokens=4)],
    "reasoning-signature-text": [
        ir.MessageStart(usage=ir.Usage(input_tokens=50, cached_tokens=20)),
        ir.BlockStart(0, "reasoning"), ir.BlockDelta(0, "reasoning", "Let me think."),
        ir.BlockDelta(0, "signature", "EqQBCkgIARABGAIiQL"), ir.BlockStop(0),
        ir.BlockStart(1, "text"), ir.BlockDelta(1, "text", "Done."), ir.BlockStop(1),
        ir.Usage(output_tokens=30, reasoning_tokens=12), ir.Finish(F.STOP, raw="end_turn")],
    "parallel-tools": [
        ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "Checking both."), ir.BlockStop(0),
        ir.BlockStart(1, "tool_call", id="toolu_01", name="weather"),
        ir.BlockDelta(1, "arguments", '{"city": '), ir.BlockDelta(1, "arguments", '"Paris"}'), ir.BlockStop(1),
        ir.BlockStart(2, "tool_call", id="toolu_02", name="weather"),
        ir.BlockDelta(2, "arguments", '{"city": "Rome"}'), ir.BlockStop(2),
        ir.Usage(input_tokens=10, output_tokens=20), ir.Finish(F.TOOL_CALLS, raw="tool_use")],
    "tool-empty-arguments": [
        ir.MessageStart(), ir.BlockStart(0, "tool_call", id="c", name="now"), ir.BlockStop(0),
        ir.Finish(F.TOOL_CALLS), ir.Usage(input_tokens=1, output_tokens=1)],
    "length": [ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "cut"), ir.BlockStop(0),
               ir.Usage(input_tokens=3, output_tokens=1), ir.Finish(F.LENGTH, raw="max_tokens")],
    "content-filter": [ir.MessageStart(), ir.Usage(input_tokens=3, output_tokens=0),
                       ir.Finish(F.CONTENT_FILTER, raw="refusal")],
    "pause": [ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "searching"), ir.BlockStop(0),
              ir.Usage(input_tokens=3, output_tokens=1), ir.Finish(F.PAUSE, raw="pause_turn")],
    "redacted-and-server-tool": [
        ir.MessageStart(), ir.BlockStart(0, "reasoning"), ir.BlockDelta(0, "redacted", "opaque"), ir.BlockStop(0),
        ir.BlockStart(1, "server_tool", raw={"type": "server_tool_use"}, raw_protocol="anthropic"), ir.BlockStop(1),
        ir.BlockStart(2, "text"), ir.BlockDelta(2, "text", "ok"), ir.BlockStop(2),
        ir.Usage(input_tokens=1, output_tokens=2), ir.Finish(F.STOP)],
    "error-mid-text": [ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "par"),
                       ir.Error(message="Overloaded", error_type="overloaded_error", status=529)],
    "error-first": [ir.MessageStart(), ir.Error(message="rate limited", error_type="rate_limit_error", status=429)],
    "error-after-finish": [ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "x"),
                           ir.BlockStop(0), ir.Finish(F.LENGTH), ir.Error(message="Token limit reached")],
    "unicode": [ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "héllo 🎯\n\"quoted\""),
                ir.BlockStop(0), ir.BlockStart(1, "tool_call", id="c", name="f"),
                ir.BlockDelta(1, "arguments", '{"emoji": "🧡", "nl": "a\\nb"}'), ir.BlockStop(1),
                ir.Finish(F.TOOL_CALLS), ir.Usage(input_tokens=1, output_tokens=1)],
    # From other protocols: a Responses web search answer (two cited parts), a refusal with logprobs.
    "citations-in-two-blocks": [
        ir.MessageStart(), ir.BlockStart(0, "text"),
        ir.BlockDelta(0, "logprobs", "", data={"content": [{"token": "A", "logprob": -1.0, "bytes": None,
                                                            "top_logprobs": []}]}),
        ir.BlockDelta(0, "text", "A fact."),
        ir.BlockDelta(0, "citation", "", data={"type": "url_citation", "url": "https://a.x/", "title": "A",
                                               "start_index": 0, "end_index": 7}), ir.BlockStop(0),
        ir.BlockStart(1, "text"), ir.BlockDelta(1, "text", " Another."),
        ir.BlockDelta(1, "citation", "", data={"type": "url_citation", "url": "https://b.x/", "title": "B",
                                               "start_index": 1, "end_index": 9}), ir.BlockStop(1),
        ir.Finish(F.STOP), ir.Usage(input_tokens=1, output_tokens=3)],
    "refusal-after-text": [
        ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "Well."), ir.BlockStop(0),
        ir.BlockStart(1, "refusal"),
        ir.BlockDelta(1, "logprobs", "", data={"content": [{"token": "No", "logprob": -0.5, "bytes": [78, 111],
                                                            "top_logprobs": []}]}),
        ir.BlockDelta(1, "refusal", "No."), ir.BlockStop(1), ir.Finish(F.REFUSAL, raw="refusal"),
        ir.Usage(input_tokens=1, output_tokens=2)],
}


@pytest.mark.parametrize("name", HAND_BUILT)
def test_hand_built_sequences_read_back(name: str) -> None:
    assert_reads_back(HAND_BUILT[name])


def test_truncated_sequence_reads_back_as_an_error() -> None:
    events: list[ir.Event] = [ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "half")]
    got = summary_from_stream(encode(events, CTX))
    assert got.error == "upstream ended without a finish reason" and got.text == "half"


@pytest.mark.parametrize("rec", recordings(protocol="openai_chat", stream=True), ids=lambda r: r.name)
def test_decoded_recordings_read_back(rec: Recording) -> None:
    assert_reads_back(decode(rec.body))


@pytest.mark.parametrize("rec", [r for r in recordings(protocol="openai_chat", stream=True)],
                         ids=lambda r: r.name)
def test_unfolded_responses_read_back(rec: Recording) -> None:
    resp = fold.fold(decode(rec.body))
    assert_reads_back(fold.unfold(resp))


@pytest.mark.parametrize("rec", [r for r in recordings(protocol="openai_chat", stream=False) if r.status < 400],
                         ids=lambda r: r.name)
def test_unfolded_json_bodies_read_back(rec: Recording) -> None:
    assert_reads_back(fold.unfold(parse_response(rec.body)))


def test_stream_and_json_agree_for_a_tool_call_response() -> None:
    resp = ir.Response(blocks=[ir.Block("tool_call", text='{"a": [1, 2]}', id="call_z", name="f")],
                       finish=ir.Finish(F.TOOL_CALLS), usage=ir.Usage(input_tokens=9, output_tokens=9))
    events = fold.unfold(resp)
    assert summary_from_stream(encode(events, CTX)) == summary_from_json(render_response(resp, CTX))
    assert summary_from_json(render_response(resp, CTX)).tool_calls == [("call_z", "f", {"a": [1, 2]})]


def test_readback_notices_a_wrong_encoder() -> None:
    """The comparison is not vacuous: a stream that lost a delta reads back differently."""

    events = HAND_BUILT["text"]
    broken = [e for e in events if not (isinstance(e, ir.BlockDelta) and e.text == ", world")]
    assert summary_from_stream(encode(broken, CTX)) != expected(fold.fold(events))
    assert replace(expected(fold.fold(events)), text="Hello") == summary_from_stream(encode(broken, CTX))
