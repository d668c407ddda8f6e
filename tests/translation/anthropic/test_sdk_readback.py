"""What the official ``anthropic`` SDK reads from our encoder equals the IR it was encoded from."""

import json

import pytest

from tests.fixtures.recorded_loader import Recording
from tests.translation.summary import Summary, summary_of
from translation import anthropic, fold, ir
from translation.protocol import EncodeContext

from .helpers import check_anthropic_wire, comparable, decode, encode, recordings
from .sdk_readback import summary_from_json, summary_from_stream

CTX = EncodeContext(model="claude-client", id="msg_readback")
STREAMS = [r for r in recordings(stream=True) if r.body]
JSON = [r for r in recordings(stream=False) if r.status < 400]
# Blocks the SDK's models do not know (a `fallback` block the installed SDK cannot
# validate even as a beta message): the JSON check cannot apply to them.
SDK_UNKNOWN_BLOCKS = {"vercel-ai/packages/anthropic/src/__fixtures__/anthropic-fallback.chunks.txt",
                      "anthropic-sdk-python/tests/lib/streaming/fixtures/fallback_response.txt",
                      "anthropic-sdk-python/tests/lib/streaming/fixtures/fallback_credit_response.txt"}


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def assert_same(client: Summary, resp: ir.Response) -> None:
    """Equal, except that the SDK reads a tool input cut mid-JSON with its partial parser."""

    want = comparable(summary_of(resp))
    client = comparable(client)
    calls = [b for b in resp.blocks if b.kind == "tool_call"]
    if any(b.text and not _parses(b.text) for b in calls):
        assert [c[:2] for c in client.tool_calls] == [c[:2] for c in want.tool_calls]
        client.tool_calls = want.tool_calls
    assert client == want


@pytest.mark.parametrize("rec", STREAMS, ids=lambda r: r.name[-70:])
def test_sdk_reads_our_stream_of_every_recording_as_its_fold(rec: Recording) -> None:
    events = decode(rec.body)
    wire = encode(events, CTX)
    check_anthropic_wire(wire)
    assert_same(summary_from_stream(wire), fold.fold(events))


@pytest.mark.parametrize("rec", [r for r in STREAMS if r.name not in SDK_UNKNOWN_BLOCKS], ids=lambda r: r.name[-70:])
def test_sdk_validates_our_json_of_every_recording_as_its_fold(rec: Recording) -> None:
    resp = fold.fold(decode(rec.body))
    if resp.error is not None:
        return  # a failed stream is answered with render_error, not a message
    assert_same(summary_from_json(anthropic.render_response(resp, CTX)), resp)


@pytest.mark.parametrize("rec", [r for r in STREAMS if "spliced" not in r.name and "duplicate" not in r.name],
                         ids=lambda r: r.name[-70:])
def test_our_decoder_agrees_with_the_sdk_on_the_upstream_bytes(rec: Recording) -> None:
    # The SDK reading the recorded upstream directly is the reference for the decoder.
    assert_same(summary_from_stream(rec.body), fold.fold(decode(rec.body)))


@pytest.mark.parametrize("rec", JSON, ids=lambda r: r.name[-70:])
def test_unfolded_json_recordings_stream_back_to_the_same_response(rec: Recording) -> None:
    resp = anthropic.parse_response(rec.body)
    wire = encode(fold.unfold(resp), CTX)
    check_anthropic_wire(wire)
    assert_same(summary_from_stream(wire), resp)
    assert_same(summary_from_json(json.loads(rec.body)), resp)


def seq(*events: ir.Event) -> list[ir.Event]:
    return list(events)


HAND_BUILT = {
    "text": seq(ir.MessageStart(id="x", usage=ir.Usage(input_tokens=20)), ir.BlockStart(0, "text"),
                ir.BlockDelta(0, "text", "Hello"), ir.BlockDelta(0, "text", " world"), ir.BlockStop(0),
                ir.Usage(output_tokens=2), ir.Finish(ir.FinishReason.STOP, raw="stop")),
    "reasoning_text_tools": seq(
        ir.MessageStart(usage=ir.Usage(input_tokens=900, cached_tokens=800)),
        ir.BlockStart(0, "reasoning", id="rs_1"), ir.BlockDelta(0, "reasoning", "Let me think"),
        ir.BlockDelta(0, "signature", "gAAAAencrypted"), ir.BlockStop(0),
        ir.BlockStart(1, "text"), ir.BlockDelta(1, "text", "Calling tools."), ir.BlockStop(1),
        ir.BlockStart(2, "tool_call", id="call_1", name="a"), ir.BlockDelta(2, "arguments", '{"x": [1, 2]}'),
        ir.BlockStop(2),
        ir.BlockStart(3, "tool_call", id="call_2", name="b"), ir.BlockStop(3),
        ir.Finish(ir.FinishReason.TOOL_CALLS, raw="tool_calls"),
        ir.Usage(input_tokens=900, output_tokens=77, cached_tokens=800, reasoning_tokens=30)),
    "unsigned_reasoning_from_chat": seq(
        ir.MessageStart(), ir.BlockStart(0, "reasoning"), ir.BlockDelta(0, "reasoning", "deepseek thoughts"),
        ir.BlockStop(0), ir.BlockStart(1, "text"), ir.BlockDelta(1, "text", "ok"), ir.BlockStop(1),
        ir.Finish(ir.FinishReason.LENGTH, raw="length"), ir.Usage(input_tokens=5, output_tokens=100)),
    "foreign_server_item": seq(
        ir.MessageStart(), ir.BlockStart(0, "server_tool", raw={"type": "web_search_call"}, raw_protocol="responses"),
        ir.BlockStop(0), ir.BlockStart(1, "text"), ir.BlockDelta(1, "text", "found"), ir.BlockStop(1),
        ir.Finish(ir.FinishReason.CONTENT_FILTER)),
    "pause": seq(ir.MessageStart(), ir.Finish(ir.FinishReason.PAUSE, raw="pause_turn")),
    "error_mid_text": seq(ir.MessageStart(), ir.BlockStart(0, "text"), ir.BlockDelta(0, "text", "part"),
                          ir.Error(message="Rate limited", error_type="rate_limit_error", status=429)),
}


@pytest.mark.parametrize("name", HAND_BUILT)
def test_sdk_reads_hand_built_sequences_as_their_fold(name: str) -> None:
    events = HAND_BUILT[name]
    wire = encode(events, CTX)
    check_anthropic_wire(wire)
    resp = fold.fold(events)
    client = summary_from_stream(wire)
    assert_same(client, resp)
    if resp.error is None:
        assert_same(summary_from_json(anthropic.render_response(resp, CTX)), resp)


def test_sdk_raises_on_our_error_event_and_the_summary_keeps_the_message() -> None:
    client = summary_from_stream(encode(HAND_BUILT["error_mid_text"], CTX))
    assert client.error == "Rate limited" and client.text == "part" and client.finish is None


def test_usage_after_finish_reaches_the_client() -> None:
    client = summary_from_stream(encode(HAND_BUILT["reasoning_text_tools"], CTX))
    assert (client.input_tokens, client.output_tokens, client.cached_tokens, client.reasoning_tokens) == (900, 77,
                                                                                                          800, 30)
    assert client.signatures == ["gAAAAencrypted"]
