"""Shared test helpers: run wire bytes through the decoder, IR through the encoder, and
check that an encoded Responses stream is well-formed."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from tests.translation.summary import Summary
from translation import ir, responses, sse
from translation.protocol import EncodeContext

FIXTURES = Path(__file__).parents[2] / "fixtures"
HAND_MADE = FIXTURES / "responses"
TERMINALS = ("response.completed", "response.incomplete", "response.failed")
LIFECYCLE = ("response.created", "response.in_progress", *TERMINALS)


def decode(wire: bytes, chunk: int | None = None) -> list[ir.Event]:
    parser = sse.SSEParser()
    decoder = responses.stream_decoder()
    out: list[ir.Event] = []
    pieces = [wire] if chunk is None else [wire[i:i + chunk] for i in range(0, len(wire), chunk)]
    for piece in pieces:
        for event in parser.feed(piece):
            out.extend(decoder.feed(event))
    for event in parser.finish():
        out.extend(decoder.feed(event))
    out.extend(decoder.finish())
    return out


def encode(events: list[ir.Event], ctx: EncodeContext | None = None, *, finish: bool = True) -> bytes:
    encoder = responses.stream_encoder(ctx or EncodeContext(model="client-model"))
    chunks = [b for event in events for b in encoder.feed(event)]
    if finish:
        chunks.extend(encoder.finish())
    return b"".join(chunks)


def hand_made(name: str) -> bytes:
    return (HAND_MADE / name).read_bytes()


def parsed_bodies(relative: str) -> list[tuple[int, Any]]:
    """``(status, response.parsed_body)`` of a cassette; the shared loader only reads
    ``body.string``, so JSON answers recorded as ``parsed_body`` reach us this way."""

    doc = yaml.safe_load((FIXTURES / "recorded" / relative).read_text())
    return [(int(i["response"]["status"]["code"]), i["response"].get("parsed_body"))
            for i in doc["interactions"]]


def same_summary(sdk: Summary, source: Summary) -> None:
    """Equality, except that the wire always carries usage numbers: an unknown count in
    the IR reads back as 0."""

    def norm(s: Summary) -> Summary:
        return dataclasses.replace(s, **{k: getattr(s, k) or 0 for k in (
            "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens")})

    assert norm(sdk) == norm(source)


def wire_events(wire: bytes) -> list[dict[str, Any]]:
    parser = sse.SSEParser()
    events = parser.feed(wire) + parser.finish()
    out = []
    for event in events:
        data = sse.loads(event.data)
        assert event.event == data["type"], "every event names its type on an event: line"
        out.append(data)
    return out


def validate_wire(wire: bytes) -> list[dict[str, Any]]:
    """The invariants of a Responses stream a strict client relies on; returns the events."""

    events = wire_events(wire)
    assert wire.endswith(b"\n\n")
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"]
    for e in events[:2]:
        assert e["response"]["status"] == "in_progress" and e["response"]["output"] == []
    assert events[-1]["type"] in TERMINALS
    assert sum(e["type"] in TERMINALS for e in events) == 1
    ids = {e["response"]["id"] for e in events if e["type"] in LIFECYCLE}
    assert len(ids) == 1, "the same response id on every lifecycle event"

    done_items: list[dict[str, Any]] = []
    open_item: dict[str, Any] | None = None
    open_index = -1
    streamed = ""  # text / arguments / summary / refusal of the open item, from its deltas
    announced: list[dict[str, Any]] = []  # the open text part's annotations, from annotation.added
    tokens: list[dict[str, Any]] = []  # the open text part's logprobs, from its deltas
    for e in events[2:-1]:
        etype = e["type"]
        if etype == "response.output_item.added":
            assert open_item is None, "one item at a time"
            assert e["output_index"] == len(done_items), "output_index increases by one"
            open_item, open_index, streamed, announced, tokens = e["item"], e["output_index"], "", [], []
            continue
        assert open_item is not None, f"{etype} outside an item"
        assert e["output_index"] == open_index
        if etype != "response.output_item.done":
            assert e["item_id"] == open_item["id"]
        if etype.endswith(".delta"):
            streamed += e["delta"]
            tokens += e.get("logprobs") or []
        if etype == "response.output_text.annotation.added":
            assert e["annotation_index"] == len(announced)
            announced.append(e["annotation"])
        elif etype == "response.output_text.done":
            assert e["text"] == streamed and e["logprobs"] == tokens
        elif etype == "response.refusal.done":
            assert e["refusal"] == streamed
        elif etype == "response.content_part.done":
            if e["part"]["type"] == "refusal":
                assert e["part"] == {"type": "refusal", "refusal": streamed}
            else:
                assert e["part"] == {"type": "output_text", "text": streamed, "annotations": announced,
                                     **({"logprobs": tokens} if tokens else {})}
        elif etype == "response.function_call_arguments.done":
            assert e["arguments"] == streamed
        elif etype == "response.reasoning_summary_text.done":
            assert e["text"] == streamed
        elif etype == "response.output_item.done":
            item = e["item"]
            assert item["type"] == open_item["type"] and item.get("id") == open_item.get("id")
            if item["type"] == "message":
                assert [p.get("text", p.get("refusal")) for p in item["content"]] == [streamed]
                assert all(p.get("annotations", []) == announced for p in item["content"])
            elif item["type"] == "function_call":
                assert item["arguments"] == streamed and item["call_id"] == open_item["call_id"]
            elif item["type"] == "reasoning":
                assert [p["text"] for p in item["summary"]] == ([streamed] if streamed else [])
            done_items.append(item)
            open_item = None
    assert open_item is None, "every item is finished before the terminal event"

    final = events[-1]["response"]
    assert final["status"] == events[-1]["type"].removeprefix("response.")
    assert final["output"] == done_items
    usage = final["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    if final["status"] == "failed":
        assert final["error"]["code"] and final["error"]["message"]
    if final["status"] == "incomplete":
        assert final["incomplete_details"]["reason"] in ("max_output_tokens", "content_filter")
    return events


def check_ir_stream(events: list[ir.Event]) -> None:
    """The IR invariants every decoder promises."""

    assert isinstance(events[0], ir.MessageStart)
    assert sum(isinstance(e, ir.MessageStart) for e in events) == 1
    terminals = [i for i, e in enumerate(events) if isinstance(e, (ir.Finish, ir.Error))]
    assert len(terminals) == 1, "exactly one terminal outcome"
    assert all(isinstance(e, ir.Usage) for e in events[terminals[0] + 1:])
    open_index: int | None = None
    next_index = 0
    for e in events:
        if isinstance(e, ir.BlockStart):
            assert open_index is None, "at most one block open"
            assert e.index == next_index
            open_index, next_index = e.index, next_index + 1
        elif isinstance(e, ir.BlockDelta):
            assert e.index == open_index
        elif isinstance(e, ir.BlockStop):
            assert e.index == open_index
            open_index = None
    assert open_index is None, "every block is closed"
