"""Shared helpers for the openai_chat tests: run bytes through the decoder, events
through the encoder, and check the IR stream invariants every decoder promises."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from translation import ir, openai_chat
from translation.protocol import EncodeContext
from translation.sse import SSEEvent, SSEParser

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "openai_chat"


def sse_events(wire: bytes, chunk_size: int | None = None) -> list[SSEEvent]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    step = chunk_size or max(len(wire), 1)
    for i in range(0, len(wire), step):
        events += parser.feed(wire[i:i + step])
    return events + parser.finish()


def decode(wire: bytes, chunk_size: int | None = None) -> list[ir.Event]:
    decoder = openai_chat.stream_decoder()
    events: list[ir.Event] = []
    for sse_event in sse_events(wire, chunk_size):
        events += decoder.feed(sse_event)
    return events + decoder.finish()


def decode_chunks(*chunks: dict[str, Any] | str, done: bool = True) -> list[ir.Event]:
    """Decode hand-written chunks (dicts are JSON-encoded, strings sent as-is)."""

    wire = "".join(f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks)
    if done:
        wire += "data: [DONE]\n\n"
    return decode(wire.encode())


def chunk(delta: dict[str, Any] | None = None, finish_reason: str | None = None,
          **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"id": "chatcmpl-t", "object": "chat.completion.chunk", "created": 1,
                            "model": "m",
                            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}]}
    body.update(extra)
    return body


def encode(events: Iterable[ir.Event], ctx: EncodeContext | None = None) -> bytes:
    encoder = openai_chat.stream_encoder(ctx or EncodeContext(model="client-model", id="chatcmpl-fixed",
                                                              created=1700000000))
    out: list[bytes] = []
    for event in events:
        out += encoder.feed(event)
    out += encoder.finish()
    assert all(isinstance(b, bytes) and b.endswith(b"\n\n") for b in out)
    return b"".join(out)


def wire_payloads(wire: bytes) -> list[Any]:
    """Every data payload of an encoded stream, JSON-decoded ("[DONE]" kept as a string)."""

    return [e.data if e.data == "[DONE]" else json.loads(e.data) for e in sse_events(wire)]


def check_ir_stream(events: list[ir.Event]) -> None:
    """MessageStart first; exactly one terminal (Finish or Error) and nothing but Usage
    after it; blocks numbered 0,1,2… in start order, at most one open, each closed
    once before the terminal, deltas only to the open block."""

    assert events, "no events"
    assert isinstance(events[0], ir.MessageStart), events[0]
    assert sum(isinstance(e, ir.MessageStart) for e in events) == 1
    terminals = [i for i, e in enumerate(events) if isinstance(e, (ir.Finish, ir.Error))]
    assert len(terminals) == 1, f"terminal outcomes: {[events[i] for i in terminals]}"
    assert all(isinstance(e, ir.Usage) for e in events[terminals[0] + 1:])
    open_index: int | None = None
    next_index = 0
    for event in events[:terminals[0]]:
        if isinstance(event, ir.BlockStart):
            assert open_index is None, "a block started while another was open"
            assert event.index == next_index
            open_index, next_index = event.index, next_index + 1
        elif isinstance(event, ir.BlockDelta):
            assert event.index == open_index, "delta for a block that is not open"
        elif isinstance(event, ir.BlockStop):
            assert event.index == open_index
            open_index = None
    assert open_index is None, "a block was left open"


def terminal(events: list[ir.Event]) -> ir.Finish | ir.Error:
    found = [e for e in events if isinstance(e, (ir.Finish, ir.Error))]
    assert len(found) == 1
    return found[0]
