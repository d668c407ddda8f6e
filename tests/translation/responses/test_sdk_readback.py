"""Our encoder and renderer, read back by the official openai SDK, against the IR they came from."""

import pytest

from tests.fixtures.recorded_loader import recordings
from tests.translation.responses.helpers import HAND_MADE, decode, encode, same_summary, validate_wire
from tests.translation.responses.sdk_readback import summary_from_json, summary_from_stream
from tests.translation.summary import Summary, summary_of
from translation import ir, responses
from translation.fold import fold, unfold
from translation.protocol import EncodeContext

STREAMS = [r for r in recordings(protocol="responses", stream=True) if r.body]
HAND_MADE_FILES = sorted(p.name for p in HAND_MADE.glob("*.sse"))
R = ir.FinishReason


def ctx() -> EncodeContext:
    return EncodeContext(model="client-model", body={"model": "client-model", "input": "hi", "stream": True})


def check_stream(events: list[ir.Event]) -> Summary:
    wire = encode(events, ctx())
    validate_wire(wire)
    sdk = summary_from_stream(wire)
    same_summary(sdk, summary_of(fold(events)))
    return sdk


def check_json(resp: ir.Response) -> None:
    same_summary(summary_from_json(responses.render_response(resp, ctx())), summary_of(resp))


@pytest.mark.parametrize("rec", STREAMS, ids=lambda r: r.name.split("/")[-1])
def test_recorded_streams_survive_our_encoder(rec):
    events = decode(rec.body)
    check_stream(events)
    resp = fold(events)
    check_stream(unfold(resp))
    check_json(resp)


@pytest.mark.parametrize("name", HAND_MADE_FILES)
def test_hand_made_transcripts_survive_our_encoder(name):
    events = decode((HAND_MADE / name).read_bytes())
    check_stream(events)
    check_json(fold(events))


def blocks(*specs):
    """IR events for blocks given as (kind, id, name, [(delta kind, text), ...])."""
    events: list[ir.Event] = []
    for index, (kind, bid, name, deltas) in enumerate(specs):
        events.append(ir.BlockStart(index, kind, id=bid, name=name))
        events.extend(ir.BlockDelta(index, dk, text) for dk, text in deltas)
        events.append(ir.BlockStop(index))
    return events


START = ir.MessageStart(id="msg_up", model="up")
USAGE = ir.Usage(input_tokens=120, output_tokens=80, cached_tokens=64, reasoning_tokens=30)

HAND_BUILT = {
    "text": [START, *blocks(("text", None, None, [("text", "Hel"), ("text", "lo")])), USAGE, ir.Finish(R.STOP)],
    "reasoning_signature_text": [
        START, *blocks(("reasoning", None, None, [("reasoning", "Let me "), ("reasoning", "think."),
                                                   ("signature", "EqQBCkYI-anthropic-signature")]),
                       ("text", None, None, [("text", "Done.")])),
        ir.Finish(R.STOP, raw="end_turn"), USAGE],
    "parallel_tools": [
        START, *blocks(("text", None, None, [("text", "Calling two tools.")]),
                       ("tool_call", "toolu_01A", "get_weather", [("arguments", '{"city":'), ("arguments", '"Oslo"}')]),
                       ("tool_call", "toolu_01B", "get_time", [("arguments", "")])),
        ir.Finish(R.TOOL_CALLS, raw="tool_use"), USAGE],
    "redacted_and_foreign_server_tool": [
        START, *blocks(("reasoning", None, None, [("redacted", "opaque-data")]),
                       ("server_tool", "srvtoolu_1", "web_search", [("text", '{"query":"x"}')]),
                       ("text", None, None, [("text", "After search.")])),
        ir.Finish(R.STOP)],
    "length": [START, *blocks(("text", None, None, [("text", "cut sh")])), ir.Finish(R.LENGTH, raw="max_tokens")],
    "content_filter": [START, ir.Finish(R.CONTENT_FILTER, raw="refusal"), USAGE],
    "error_mid_tool": [START, *blocks(("text", None, None, [("text", "a")]))[:-1],
                       ir.Error("Overloaded", error_type="overloaded_error", status=529)],
}


@pytest.mark.parametrize("name", HAND_BUILT)
def test_hand_built_ir_reads_back_the_same(name):
    events = HAND_BUILT[name]
    sdk = check_stream(events)
    check_json(fold(events))
    if name == "reasoning_signature_text":
        assert sdk.signatures == ["EqQBCkYI-anthropic-signature"] and sdk.reasoning == "Let me think."
    if name == "parallel_tools":
        assert [c[:2] for c in sdk.tool_calls] == [("toolu_01A", "get_weather"), ("toolu_01B", "get_time")]
        assert sdk.tool_calls[1][2] == {}


def test_truncated_ir_reads_back_as_an_error():
    sdk = summary_from_stream(encode([START, *blocks(("text", None, None, [("text", "x")]))]))
    assert sdk.error == "upstream ended without a finish reason" and sdk.text == "x" and sdk.finish is None

