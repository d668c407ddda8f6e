"""The light tap (``translation.passthrough.Tap._light``): a passed-through stream's plain content
deltas are read without the decoder, and nothing the client gets or the gateway learns changes.

Each recorded stream is run through the tap as it is and through the same tap with the light path
turned off (every event to the decoder, as before): the bytes forwarded and the IR events (usage,
finish, errors, ids, every delta the bounds and estimates count) must be the same, whole, cut
anywhere, and with a broken event put anywhere.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests.fixtures.recorded_loader import recordings
from translation import ir, registry, sse
from translation.passthrough import Tap, model_rewrite
from translation.sse import SSEEvent

LIGHT = ("anthropic", "openai_chat")


@pytest.fixture(autouse=True)
def fixed_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    # An ending the gateway makes names a new id and the time; both runs must make the same ones.
    monkeypatch.setattr("translation.ids.new_id", lambda prefix="": prefix + "fixed")
    for tap in ("translation.openai_chat.tap", "translation.responses.tap"):
        monkeypatch.setattr(f"{tap}.time", SimpleNamespace(time=lambda: 1_800_000_000.0))


def events_of(wire: bytes) -> list[SSEEvent]:
    parser = sse.SSEParser()
    return parser.feed(wire) + parser.finish()


def heavy(tap: Tap) -> Tap:
    """``tap`` with every event read by its decoder (the tap before the light path)."""

    tap._light = lambda event: None  # type: ignore[method-assign]
    return tap


def run(tap: Tap, events: list[SSEEvent]) -> tuple[bytes, list[ir.Event]]:
    wire, decoded = [], []
    for event in events:
        out, data = tap.feed(event)
        decoded.extend(out)
        wire.append(data)
    decoded.extend(tap.finish())
    transport = next((e for e in decoded if isinstance(e, ir.Error) and e.transport), None)
    wire.append(tap.ending(transport if isinstance(transport, ir.Error) else None))
    return b"".join(wire), decoded


def observable(events: list[ir.Event]) -> list[ir.Event]:
    # Citation deltas carry offsets into the block's text that the light path does not count; no
    # passed-through stream reads them (the client gets the upstream's own events).
    return [e for e in events if not (isinstance(e, ir.BlockDelta) and e.kind == "citation")]


def both(proto: str, events: list[SSEEvent], rewrite: Any = None) -> None:
    made = registry.get(proto).stream_tap
    light_wire, light_events = run(made(rewrite, "client-model"), events)
    heavy_wire, heavy_events = run(heavy(made(rewrite, "client-model")), events)
    assert light_wire == heavy_wire
    assert observable(light_events) == observable(heavy_events)


STREAMS = [r for r in recordings(stream=True) if r.protocol in LIGHT]


@pytest.mark.parametrize("rec", STREAMS, ids=[r.name for r in STREAMS])
def test_every_recorded_stream_gives_the_same_bytes_and_events_light_or_not(rec: Any) -> None:
    sent = events_of(rec.body)
    both(rec.protocol, sent)
    for cut in range(0, len(sent), max(1, len(sent) // 8)):
        both(rec.protocol, sent[:cut])


@pytest.mark.parametrize("rec", STREAMS, ids=[r.name for r in STREAMS])
def test_a_broken_event_anywhere_ends_the_stream_as_before(rec: Any) -> None:
    sent = events_of(rec.body)
    for at in range(0, len(sent), max(1, len(sent) // 6)):
        for bad in ("{not json", "[1, 2]", '{"type":"content_block_delta","index":7,"delta":{"type":"text_delta","text":"x"}}',
                    '{"choices":[{"index":0,"delta":{"content":5}}]}'):
            both(rec.protocol, [*sent[:at], SSEEvent(data=bad, event=sent[at].event), *sent[at:]])


def anthropic_stream(*deltas: dict[str, Any]) -> list[SSEEvent]:
    def ev(name: str, data: dict[str, Any]) -> SSEEvent:
        return SSEEvent(data=sse.dumps(data), event=name)

    return [ev("message_start", {"type": "message_start", "message": {
                "id": "msg_1", "type": "message", "role": "assistant", "model": "up-model", "content": [],
                "stop_reason": None, "usage": {"input_tokens": 12, "output_tokens": 1}}}),
            ev("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "text", "text": ""}}),
            *(ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": d}) for d in deltas),
            ev("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                 "usage": {"output_tokens": 7}}),
            ev("message_stop", {"type": "message_stop"})]


def test_anthropic_deltas_are_read_light_and_forwarded_as_they_came() -> None:
    sent = anthropic_stream({"type": "text_delta", "text": "Hel"}, {"type": "text_delta", "text": "lo \u00e9\n\"x\""})
    tap = registry.get("anthropic").stream_tap(model_rewrite("up-model", "my-alias"), "my-alias")
    tap.decoder.feed = _refusing(tap.decoder.feed, "content_block_delta")  # type: ignore[method-assign]
    wire, events = run(tap, sent)
    got = events_of(wire)
    assert [(e.event, e.data) for e in got[1:]] == [(e.event, e.data) for e in sent[1:]]  # byte for byte
    assert sse.loads(got[0].data)["message"]["model"] == "my-alias"  # the one rewrite
    assert [e.text for e in events if isinstance(e, ir.BlockDelta)] == ["Hel", "lo \u00e9\n\"x\""]
    start = next(e for e in events if isinstance(e, ir.MessageStart))
    assert start.id == "msg_1" and start.usage is not None and start.usage.input_tokens == 12
    assert next(e for e in events if isinstance(e, ir.Finish)).reason == ir.FinishReason.STOP
    assert [e.output_tokens for e in events if isinstance(e, ir.Usage)][-1] == 7


def test_an_anthropic_error_event_is_still_read_by_the_decoder() -> None:
    sent = anthropic_stream({"type": "text_delta", "text": "Hi"})[:3]
    sent.append(SSEEvent(data='{"type":"error","error":{"type":"overloaded_error","message":"busy"}}',
                         event="error"))
    _, events = run(registry.get("anthropic").stream_tap(None, "m"), sent)
    error = next(e for e in events if isinstance(e, ir.Error))
    assert error.message == "busy" and not error.transport


def chat_chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> SSEEvent:
    return SSEEvent(data=sse.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                                    "model": "up-model", "choices": [{"index": 0, "delta": delta,
                                                                      "finish_reason": finish}], **extra}))


def test_chat_text_chunks_are_read_light_and_usage_finish_and_error_are_not() -> None:
    sent = [chat_chunk({"role": "assistant", "content": ""}), chat_chunk({"content": "Hel"}),
            chat_chunk({"content": "lo"}), chat_chunk({}, "length"),
            SSEEvent(data=sse.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                                     "model": "up-model", "choices": [],
                                     "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})),
            SSEEvent(data="[DONE]")]
    tap = registry.get("openai_chat").stream_tap(model_rewrite("up-model", "my-alias"), "my-alias")
    to_decoder: list[SSEEvent] = []
    feed = tap.decoder.feed

    def counted(event: SSEEvent) -> list[ir.Event]:
        to_decoder.append(event)
        return feed(event)

    tap.decoder.feed = counted  # type: ignore[method-assign]
    wire, events = run(tap, sent)
    # "Hel" opens the text block (the decoder's), "lo" is light; the finish, usage and end are the decoder's.
    assert [e for e in sent if e not in to_decoder] == [sent[2]]
    assert [e.text for e in events if isinstance(e, ir.BlockDelta)] == ["Hel", "lo"]
    assert next(e for e in events if isinstance(e, ir.Finish)).reason == ir.FinishReason.LENGTH
    assert next(e for e in events if isinstance(e, ir.Usage)).output_tokens == 2
    assert all(sse.loads(e.data)["model"] == "my-alias" for e in events_of(wire) if e.data != "[DONE]")
    error = [chat_chunk({"role": "assistant", "content": ""}), chat_chunk({"content": "Hel"}),
             SSEEvent(data='{"error":{"message":"boom","type":"server_error"}}')]
    _, events = run(registry.get("openai_chat").stream_tap(None, "m"), error)
    assert next(e for e in events if isinstance(e, ir.Error)).message == "boom"


def _refusing(feed: Any, name: str) -> Any:
    def guarded(event: SSEEvent) -> list[ir.Event]:
        assert event.event != name, f"{name} went to the decoder"
        return feed(event)

    return guarded


def test_a_chat_chunk_with_a_null_usage_is_still_light() -> None:
    # OpenAI writes "usage": null on every chunk of a stream that asked for include_usage.
    sent = [chat_chunk({"content": "Hel"}, usage=None), chat_chunk({"content": "lo"}, usage=None)]
    tap = registry.get("openai_chat").stream_tap(None, "m")
    tap.feed(sent[0])
    read: list[ir.Event] = []
    tap.decoder.feed = lambda event: read.append(event) or []  # type: ignore[method-assign, func-returns-value]
    events, wire = tap.feed(sent[1])
    assert not read and [e.text for e in events if isinstance(e, ir.BlockDelta)] == ["lo"]
    assert wire == sse.frame(sent[1])
