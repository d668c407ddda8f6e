"""Hand-made transcripts (tests/fixtures/openai_chat/*.sse) for what the recordings lack,
decoded, checked, and re-encoded for an SDK client."""

import json
from pathlib import Path

import pytest

from tests.translation.summary import summary_of
from translation import fold, ir

from .helpers import FIXTURES, check_ir_stream, decode, encode, terminal
from .sdk_readback import summary_from_stream

F = ir.FinishReason
TRANSCRIPTS = sorted(FIXTURES.glob("*.sse"))


def replay(name: str) -> tuple[list[ir.Event], ir.Response]:
    events = decode((FIXTURES / f"{name}.sse").read_bytes())
    check_ir_stream(events)
    return events, fold.fold(events)


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: p.stem)
def test_every_transcript_says_it_is_hand_made_and_decodes_cleanly(path: Path) -> None:
    assert path.read_text().startswith(": hand-made")
    check_ir_stream(decode(path.read_bytes()))


def test_reasoning_then_text() -> None:
    events, resp = replay("reasoning-then-text")
    assert [(b.kind, b.text) for b in resp.blocks] == [("reasoning", "Two plus two is four."),
                                                       ("text", "The answer is 4.")]
    assert resp.usage == ir.Usage(input_tokens=12, output_tokens=20, cached_tokens=8, reasoning_tokens=9)
    assert terminal(events) == ir.Finish(F.STOP, raw="stop")


def test_text_then_tool() -> None:
    _, resp = replay("text-then-tool")
    assert [b.kind for b in resp.blocks] == ["text", "tool_call"]
    call = resp.blocks[1]
    assert (call.id, call.name, json.loads(call.text)) == ("call_hm2a", "get_weather", {"city": "Oslo"})
    assert resp.finish == ir.Finish(F.TOOL_CALLS, raw="tool_calls")
    assert resp.usage == ir.Usage(input_tokens=40, output_tokens=18)


def test_tool_then_text_then_reasoning() -> None:
    events, resp = replay("tool-then-text-then-reasoning")
    assert [b.kind for b in resp.blocks] == ["tool_call", "text", "reasoning"]
    assert [e for e in events if isinstance(e, ir.BlockStop)] == [ir.BlockStop(0), ir.BlockStop(1), ir.BlockStop(2)]
    assert resp.blocks[0].text == '{"q":"tides"}'


def test_two_parallel_tools() -> None:
    _, resp = replay("two-parallel-tools")
    assert [(b.id, json.loads(b.text)) for b in resp.blocks] == [("call_paris", {"city": "Paris"}),
                                                                 ("call_rome", {"city": "Rome"})]


def test_interleaved_tool_fragments_are_malformed() -> None:
    events, resp = replay("interleaved-tool-fragments")
    err = terminal(events)
    assert isinstance(err, ir.Error) and err.error_type == "malformed_upstream"
    assert [b.id for b in resp.blocks] == ["call_a", "call_b"]


def test_error_chunk_mid_stream() -> None:
    events, resp = replay("error-chunk-mid-stream")
    err = terminal(events)
    assert err == ir.Error(message="Rate limit exceeded: too many requests", error_type="rate_limit_error",
                           status=429, code="429")
    assert resp.blocks[0].text == "Once upon a time"


def test_truncated() -> None:
    events, resp = replay("truncated")
    assert events[-2:] == [ir.BlockStop(0), ir.transport_error(ir.TransportFailure.TRUNCATED, "upstream stream ended before completion")]
    assert resp.blocks[0].text == "The first half of an answ"


@pytest.mark.parametrize("case", ["text", "tool"])
def test_nonstandard_upstream_decodes_to_the_same_ir_as_the_standard_form(case: str) -> None:
    nonstandard, _ = replay(f"nonstandard-{case}")
    standard, _ = replay(f"standard-{case}")
    assert nonstandard == standard
    assert isinstance(terminal(nonstandard), ir.Finish)
    assert nonstandard[0] == ir.MessageStart(id=f"stream:chat:{1 if case == 'text' else 2}", model=None)


def test_nonstandard_tool_stream_content() -> None:
    _, resp = replay("nonstandard-tool")
    assert [(b.id, b.name, b.text) for b in resp.blocks] == [("call_1", "get_weather", '{"city":"Singapore"}')]
    assert resp.finish == ir.Finish(F.TOOL_CALLS, raw="tool_calls")


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: p.stem)
def test_decode_then_encode_reads_back_the_same_in_the_sdk(path: Path) -> None:
    events = decode(path.read_bytes())
    source = summary_of(fold.fold(events))
    got = summary_from_stream(encode(events))
    if source.error is not None:
        assert (got.error, got.text, got.reasoning, got.tool_calls) == (
            source.error, source.text, source.reasoning, source.tool_calls)
    else:
        assert got == source
