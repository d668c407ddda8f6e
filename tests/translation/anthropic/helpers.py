"""Shared helpers for the Anthropic tests: run bytes through the decoder, IR through
the encoder, and check the invariants of both sides."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.fixtures.recorded_loader import Recording
from tests.fixtures.recorded_loader import recordings as _load
from tests.translation.summary import Summary, carried_by
from translation import anthropic, ir, sse
from translation.protocol import EncodeContext

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "anthropic"
RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "recorded"
STOP_REASONS = {"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal",
                "model_context_window_exceeded"}


@functools.cache
def _anthropic_recordings() -> tuple[Recording, ...]:
    return tuple(_load(protocol="anthropic"))


def recordings(stream: bool | None = None) -> list[Recording]:
    """The Anthropic recordings, loaded once per test run (YAML parsing is slow)."""

    return [r for r in _anthropic_recordings() if stream is None or r.stream == stream]


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def decode(wire: bytes, chunk: int | None = None) -> list[ir.Event]:
    events, _ = decode_with(wire, chunk)
    return events


def decode_with(wire: bytes, chunk: int | None = None) -> tuple[list[ir.Event], Any]:
    """All IR events of ``wire`` (optionally fed ``chunk`` bytes at a time) and the decoder."""

    parser = sse.SSEParser()
    decoder = anthropic.stream_decoder()
    pieces = [wire] if chunk is None else [wire[i:i + chunk] for i in range(0, len(wire), chunk)]
    out: list[ir.Event] = []
    for piece in pieces:
        for event in parser.feed(piece):
            out += decoder.feed(event)
    for event in parser.finish():
        out += decoder.feed(event)
    out += decoder.finish()
    return out, decoder


def encode(events: Iterable[ir.Event], ctx: EncodeContext | None = None) -> bytes:
    encoder = anthropic.stream_encoder(ctx or EncodeContext(model="claude-test", id="msg_test"))
    out: list[bytes] = []
    for event in events:
        out += encoder.feed(event)
    out += encoder.finish()
    return b"".join(out)


def wire_events(wire: bytes) -> list[tuple[str | None, Any]]:
    parser = sse.SSEParser()
    return [(e.event, sse.loads(e.data)) for e in parser.feed(wire) + parser.finish()]


def check_ir_stream(events: list[ir.Event]) -> None:
    """MessageStart first, exactly one terminal outcome, blocks paired with
    indexes 0,1,2… in order and at most one open, deltas only for the open block."""

    assert events and isinstance(events[0], ir.MessageStart), events[:1]
    assert sum(isinstance(e, ir.MessageStart) for e in events) == 1
    terminals = [e for e in events if isinstance(e, (ir.Finish, ir.Error))]
    assert len(terminals) == 1, terminals
    open_index: int | None = None
    next_index = 0
    for event in events:
        match event:
            case ir.BlockStart():
                assert open_index is None, f"block {event.index} started while {open_index} is open"
                assert event.index == next_index, (event.index, next_index)
                open_index, next_index = event.index, next_index + 1
            case ir.BlockDelta():
                assert event.index == open_index, f"delta for {event.index} while {open_index} is open"
            case ir.BlockStop():
                assert event.index == open_index, f"stop for {event.index} while {open_index} is open"
                open_index = None
            case ir.Finish() | ir.Error():
                assert open_index is None, "terminal outcome with a block still open"
    if isinstance(terminals[0], ir.Error):
        assert events[-1] is terminals[0], "nothing may follow an error"


def check_anthropic_wire(wire: bytes) -> list[tuple[str | None, Any]]:
    """A well-formed Messages stream as a client sees it; returns the parsed events."""

    events = wire_events(wire)
    assert wire.endswith(b"\n\n")
    names = [name for name, _ in events]
    for name, payload in events:
        assert name == payload["type"], (name, payload)
    assert names[:2] == ["message_start", "ping"], names[:2]
    assert names.count("message_start") == 1
    assert names.count("message_stop") == 1 and names[-1] == "message_stop", names[-3:]
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert set(start["usage"]) >= {"input_tokens", "output_tokens", "cache_creation_input_tokens",
                                   "cache_read_input_tokens"}
    open_block: dict[str, Any] | None = None
    deltas: list[str] = []
    next_index = 0
    ended = False
    for name, payload in events[2:]:
        assert not ended or name == "message_stop", f"{name} after the stream's end"
        match name:
            case "content_block_start":
                assert open_block is None and payload["index"] == next_index
                open_block, deltas, next_index = payload["content_block"], [], next_index + 1
            case "content_block_delta":
                assert open_block is not None and payload["index"] == next_index - 1
                deltas.append(payload["delta"]["type"])
                allowed = {"text": {"text_delta", "citations_delta"}, "thinking": {"thinking_delta", "signature_delta"},
                           "tool_use": {"input_json_delta"}}.get(open_block["type"], set())
                assert payload["delta"]["type"] in allowed, (open_block["type"], payload["delta"])
            case "content_block_stop":
                assert open_block is not None and payload["index"] == next_index - 1
                if open_block["type"] == "thinking":
                    assert deltas and deltas[-1] == "signature_delta", "thinking must end with signature_delta"
                    assert deltas.count("signature_delta") == 1
                open_block = None
            case "message_delta":
                assert open_block is None
                assert payload["delta"]["stop_reason"] in STOP_REASONS
                usage = payload["usage"]
                for key in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                            "cache_read_input_tokens"):
                    assert isinstance(usage[key], int) and usage[key] >= 0, usage
                ended = True
            case "error":
                assert open_block is None
                assert isinstance(payload["error"]["type"], str) and isinstance(payload["error"]["message"], str)
                ended = True
            case "message_stop":
                assert open_block is None and ended, "message_stop without message_delta or error"
            case "ping":
                pass
            case _:
                raise AssertionError(f"unexpected event {name}")
    return events


def comparable(summary: Summary) -> Summary:
    """The Anthropic wire always shows counts (0 when unknown); the IR may say None. A
    refusal message is its stop_details, logprobs and OpenAI file citations are not shown."""

    summary = carried_by("anthropic", summary)
    summary.input_tokens = summary.input_tokens or 0
    summary.output_tokens = summary.output_tokens or 0
    summary.cached_tokens = summary.cached_tokens or 0
    return summary
