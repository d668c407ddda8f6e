"""Hypothesis: for any valid IR event sequence the encoder writes a well-formed Messages stream."""

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.translation.summary import summary_of
from translation import anthropic, fold, ir, sse
from translation.protocol import EncodeContext

from .helpers import check_anthropic_wire, check_ir_stream, comparable, decode
from .sdk_readback import summary_from_stream

TEXT = st.text(max_size=12)
DELTA_KINDS: dict[str, list[ir.DeltaKind]] = {
    "text": ["text", "text", "citation", "logprobs"], "reasoning": ["reasoning", "signature"],
    "tool_call": ["arguments"], "server_tool": ["text"], "refusal": ["refusal"],
}
DATA = {
    "citation": st.builds(lambda kind, end: {"type": kind, "url": "https://e.x/", "title": "E", "start_index": 0,
                                             "end_index": end, "raw": {"type": kind}},
                          st.sampled_from(["url_citation", "file_citation"]), st.integers(0, 5)),
    "logprobs": st.just({"content": [{"token": "t", "logprob": -1.0, "bytes": None, "top_logprobs": []}]}),
}
usage_st = st.builds(ir.Usage, input_tokens=st.none() | st.integers(0, 10**6),
                     output_tokens=st.none() | st.integers(0, 10**5), cached_tokens=st.none() | st.integers(0, 1000),
                     cache_creation_tokens=st.none() | st.integers(0, 1000),
                     reasoning_tokens=st.none() | st.integers(0, 1000))
finish_st = st.builds(ir.Finish, reason=st.sampled_from(list(ir.FinishReason)),
                      raw=st.sampled_from([None, "end_turn", "stop_sequence", "max_tokens", "tool_use", "refusal",
                                           "pause_turn", "model_context_window_exceeded", "stop", "length"]),
                      stop_sequence=st.none() | st.just("###"))
error_st = st.builds(ir.Error, message=TEXT, error_type=st.sampled_from(["overloaded_error", "rate_limit_error",
                                                                          "malformed_upstream", "x"]),
                     status=st.sampled_from([400, 401, 429, 500, 502, 529]))


@st.composite
def arguments(draw: st.DrawFn) -> list[str]:
    """What models send: a JSON object in fragments, maybe cut short, sometimes not an object at all."""

    value = draw(st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=6) | st.booleans()
                                 | st.none() | st.lists(st.integers(), max_size=2), max_size=3))
    text = draw(st.sampled_from([json.dumps(value), "", "null", "[1, 2]", "00", "  "]))
    if draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=4)))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


@st.composite
def block(draw: st.DrawFn, index: int) -> list[ir.Event]:
    kinds_of_block: list[ir.BlockKind] = ["text", "reasoning", "tool_call", "server_tool", "refusal"]
    kind = draw(st.sampled_from(kinds_of_block))
    start = ir.BlockStart(index, kind)
    if kind == "tool_call":
        start.id, start.name = draw(st.none() | st.just(f"toolu_{index}")), draw(st.none() | TEXT)
    if kind == "server_tool":
        start.raw = {"type": "server_tool_use", "id": f"srvtoolu_{index}", "name": "web_search", "input": {}}
        start.raw_protocol = draw(st.sampled_from(["anthropic", "responses"]))
    if kind == "reasoning" and draw(st.booleans()):
        kinds: list[ir.DeltaKind] = ["redacted"]
    else:
        kinds = DELTA_KINDS[kind]
    if kind == "tool_call":
        deltas = [ir.BlockDelta(index, "arguments", piece) for piece in draw(arguments())]
    else:
        deltas = [ir.BlockDelta(index, k, "", data=draw(DATA[k])) if k in DATA else ir.BlockDelta(index, k, draw(TEXT))
                  for k in draw(st.lists(st.sampled_from(kinds), max_size=5))]
    extra = draw(st.lists(usage_st, max_size=1))
    return [start, *deltas, *extra, ir.BlockStop(index)]


@st.composite
def ir_stream(draw: st.DrawFn) -> list[ir.Event]:
    events: list[ir.Event] = [ir.MessageStart(id="up", model="up-model", usage=draw(st.none() | usage_st))]
    for index in range(draw(st.integers(0, 6))):
        events += draw(block(index))
    events += draw(st.lists(usage_st, max_size=2))
    ending = draw(st.sampled_from(["finish", "finish_then_usage", "error", "nothing"]))
    if ending.startswith("finish"):
        events.append(draw(finish_st))
    if ending == "finish_then_usage":
        events.append(draw(usage_st))
    if ending == "error":
        events.append(draw(error_st))
    return events


def encoded(events: list[ir.Event]) -> tuple[bytes, list[bytes]]:
    encoder = anthropic.stream_encoder(EncodeContext(model="claude-client", id="msg_prop"))
    chunks = [c for e in events for c in encoder.feed(e)] + encoder.finish()
    assert encoder.finish() == [] and encoder.feed(ir.MessageStart()) == []
    return b"".join(chunks), chunks


def expected_blocks(events: list[ir.Event]) -> int:
    """Blocks an Anthropic client should see: everything but empty reasoning, foreign server
    items and refusals (the message's stop_details)."""

    count = 0
    for b in fold.fold(events).blocks:
        if b.kind == "server_tool":
            count += b.raw_protocol == "anthropic"
        elif b.kind == "reasoning":
            count += bool(b.text or b.signature or b.redacted)
        elif b.kind == "refusal":
            pass
        else:
            count += 1
    return count


@settings(max_examples=300, deadline=None)
@given(ir_stream())
def test_encoder_output_is_always_well_formed(events: list[ir.Event]) -> None:
    wire, chunks = encoded(events)
    for chunk in chunks:  # each element is one complete SSE event
        assert len(sse.SSEParser().feed(chunk)) == 1
    parsed = check_anthropic_wire(wire)
    starts = [p for _, p in parsed if p["type"] == "content_block_start"]
    assert len(starts) == expected_blocks(events)
    resp = fold.fold(events)
    terminal = [p for _, p in parsed if p["type"] in ("message_delta", "error")]
    assert len(terminal) == 1
    if resp.error is not None or resp.finish is None:
        assert terminal[0]["type"] == "error"
    else:
        assert terminal[0]["type"] == "message_delta"
        merged = ir.Usage()
        for e in events:
            if isinstance(e, ir.MessageStart) and e.usage is not None:
                merged = merged.merge(e.usage)
            elif isinstance(e, ir.Usage):
                merged = merged.merge(e)
        usage: dict[str, Any] = terminal[0]["usage"]
        assert usage["output_tokens"] == (merged.output_tokens or 0)
        assert usage["cache_read_input_tokens"] == (merged.cached_tokens or 0)


@settings(max_examples=100, deadline=None)
@given(ir_stream())
def test_our_decoder_reads_the_encoder_back_into_a_valid_ir_stream(events: list[ir.Event]) -> None:
    wire, _ = encoded(events)
    check_ir_stream(decode(wire))


@settings(max_examples=40, deadline=None)
@given(ir_stream())
def test_the_sdk_reads_random_streams_as_their_fold(events: list[ir.Event]) -> None:
    resp = fold.fold(events)
    if resp.finish is None and resp.error is None:
        return  # the encoder reports a missing finish itself; nothing to compare
    client = comparable(summary_from_stream(encoded(events)[0]))
    want = comparable(summary_of(resp))
    assert (client.text, client.reasoning, client.error) == (want.text, want.reasoning, want.error)
    # Random arguments are not JSON: compare ids (generated when the IR has none) and names.
    assert len(client.tool_calls) == len(want.tool_calls)
    for (got_id, got_name, _), (want_id, want_name, _) in zip(client.tool_calls, want.tool_calls):
        assert got_name == want_name and (got_id == want_id or not want_id and got_id.startswith("toolu_"))
    if resp.error is None:
        assert client.finish == want.finish if resp.finish and resp.finish.reason != ir.FinishReason.ERROR \
            else client.finish == ir.FinishReason.STOP
        assert (client.output_tokens, client.cached_tokens) == (want.output_tokens, want.cached_tokens)
        assert (client.refusal, client.citations) == (want.refusal, want.citations)
        u = resp.usage
        if (u.input_tokens or 0) >= (u.cached_tokens or 0) + (u.cache_creation_tokens or 0):
            assert client.input_tokens == want.input_tokens


@settings(max_examples=50, deadline=None)
@given(ir_stream(), st.lists(st.integers(1, 400), max_size=8))
def test_decoder_is_independent_of_chunking(events: list[ir.Event], cuts: list[int]) -> None:
    wire, _ = encoded(events)
    whole = decode(wire)
    parser, decoder, out = sse.SSEParser(), anthropic.stream_decoder(), []
    points = sorted({c % (len(wire) + 1) for c in cuts})
    for a, b in zip([0, *points], [*points, len(wire)]):
        for e in parser.feed(wire[a:b]):
            out += decoder.feed(e)
    for e in parser.finish():
        out += decoder.feed(e)
    out += decoder.finish()
    assert out == whole
