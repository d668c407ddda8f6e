"""The light tap (``translation.passthrough.Tap._light``): a passed-through stream's plain content
deltas are read without the decoder, and nothing the client gets or the gateway learns changes.

Each recorded stream is run through the tap as it is and through the same tap with the light path
turned off (every event to the decoder, as before): the bytes forwarded and the IR events (usage,
finish, errors, ids, every delta the bounds and estimates count) must be the same, whole, cut
anywhere, and with a broken event put anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.fixtures.recorded_loader import recordings
from translation import ir, registry, sse
from translation.passthrough import Tap, model_rewrite
from translation.sse import SSEEvent

LIGHT = ("anthropic", "openai_chat", "responses")


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


def both(proto: str, events: list[SSEEvent], rewrite: Any = None) -> tuple[bytes, list[ir.Event]]:
    made = registry.get(proto).stream_tap
    light_wire, light_events = run(made(rewrite, "client-model"), events)
    heavy_wire, heavy_events = run(heavy(made(rewrite, "client-model")), events)
    assert light_wire == heavy_wire
    if proto == "responses":  # its citations are read by the decoder, light or not: every event the same
        assert light_events == heavy_events
    else:
        assert observable(light_events) == observable(heavy_events)
    return light_wire, light_events


@dataclass
class Transcript:
    name: str
    protocol: str
    body: bytes


HAND_MADE = Path(__file__).parents[1] / "fixtures"
STREAMS = [r for r in recordings(stream=True) if r.protocol in LIGHT] + [
    Transcript(f"{path.parent.name}/{path.name}", path.parent.name, path.read_bytes())
    for proto in LIGHT for path in sorted((HAND_MADE / proto).glob("*.sse"))]


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
                    '{"choices":[{"index":0,"delta":{"content":5}}]}',
                    '{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":5}',
                    '{"type":"response.output_text.delta","output_index":0,"content_index":null,"delta":"x"}',
                    '{"type":"response.function_call_arguments.delta","output_index":9,"delta":"{"}'):
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


def resp(data: dict[str, Any], named: bool = True) -> SSEEvent:
    return SSEEvent(data=sse.dumps(data), event=data["type"] if named else None)


def text_delta(text: str, seq: int, **extra: Any) -> dict[str, Any]:
    # As OpenAI writes them: item id, sequence number, empty logprobs, an obfuscation pad.
    return {"type": "response.output_text.delta", "sequence_number": seq, "item_id": "msg_1", "output_index": 0,
            "content_index": 0, "delta": text, "logprobs": [], "obfuscation": "aB3x", **extra}


def responses_stream(*middle: dict[str, Any], text: str | None = None, named: bool = True) -> list[SSEEvent]:
    """A message of one text part around ``middle``; ``text``: what its ``.done`` events say (default:
    the text deltas' concatenation)."""

    if text is None:
        text = "".join(d["delta"] for d in middle
                       if d["type"] == "response.output_text.delta" and isinstance(d["delta"], str))
    response = {"id": "resp_1", "object": "response", "created_at": 1, "status": "in_progress",
                "model": "up-model", "output": []}
    part = {"type": "output_text", "text": text, "annotations": []}
    message = {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant", "content": [part]}
    events = [
        {"type": "response.created", "sequence_number": 0, "response": response},
        {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
         "item": {**message, "status": "in_progress", "content": []}},
        {"type": "response.content_part.added", "sequence_number": 2, "item_id": "msg_1", "output_index": 0,
         "content_index": 0, "part": {**part, "text": ""}},
        *middle,
        {"type": "response.output_text.done", "sequence_number": 90, "item_id": "msg_1", "output_index": 0,
         "content_index": 0, "text": text, "logprobs": []},
        {"type": "response.content_part.done", "sequence_number": 91, "item_id": "msg_1", "output_index": 0,
         "content_index": 0, "part": part},
        {"type": "response.output_item.done", "sequence_number": 92, "output_index": 0, "item": message},
        {"type": "response.completed", "sequence_number": 93, "response": {
            **response, "status": "completed", "output": [message],
            "usage": {"input_tokens": 12, "output_tokens": 7, "total_tokens": 19}}},
    ]
    return [resp(e, named) for e in events]


def counting(tap: Tap) -> list[str]:
    """The types of the events ``tap``'s decoder is fed from now on."""

    fed: list[str] = []
    feed = tap.decoder.feed

    def counted(event: SSEEvent) -> list[ir.Event]:
        fed.append(sse.loads(event.data).get("type") if event.data.startswith("{") else event.data)
        return feed(event)

    tap.decoder.feed = counted  # type: ignore[method-assign]
    return fed


def deltas(events: list[ir.Event], kind: str = "text") -> list[str]:
    return [e.text for e in events if isinstance(e, ir.BlockDelta) and e.kind == kind]


@pytest.mark.parametrize("named", [True, False], ids=["event-lines", "data-only"])
def test_responses_text_deltas_are_read_light_and_forwarded_as_they_came(named: bool) -> None:
    sent = responses_stream(text_delta("Hel", 3), text_delta("lo \u00e9\n\"x\"", 4), named=named)
    both("responses", sent, model_rewrite("up-model", "my-alias"))
    tap = registry.get("responses").stream_tap(model_rewrite("up-model", "my-alias"), "my-alias")
    fed = counting(tap)
    wire, events = run(tap, sent)
    assert "response.output_text.delta" not in fed and len(fed) == len(sent) - 2
    got = events_of(wire)
    assert [(e.event, e.data) for e in got[1:-1]] == [(e.event, e.data) for e in sent[1:-1]]  # byte for byte
    assert [sse.loads(e.data)["response"]["model"] for e in (got[0], got[-1])] == ["my-alias", "my-alias"]
    assert deltas(events) == ["Hel", "lo \u00e9\n\"x\""]  # the .done events add nothing: the text is known
    assert next(e for e in events if isinstance(e, ir.MessageStart)).model == "up-model"
    assert next(e for e in events if isinstance(e, ir.Finish)).reason == ir.FinishReason.STOP
    assert next(e for e in events if isinstance(e, ir.Usage)).output_tokens == 7


def test_a_responses_done_event_adds_only_what_the_light_deltas_did_not_deliver() -> None:
    sent = responses_stream(text_delta("Hel", 3), text_delta("lo", 4), text="Hello!")
    _, events = both("responses", sent)
    assert deltas(events) == ["Hel", "lo", "!"]
    # One that disagrees with them is not an extension: the deltas stand.
    _, events = both("responses", responses_stream(text_delta("Hel", 3), text_delta("lo", 4), text="Help"))
    assert deltas(events) == ["Hel", "lo"]


@pytest.mark.parametrize("odd", [
    {"logprobs": [{"token": "lo", "logprob": -0.1, "bytes": [108, 111], "top_logprobs": []}]},
    {"output_index": 1},  # an item the decoder has not opened: it opens one
    {"content_index": 1},  # a part never announced: the decoder opens a block for it
    {"content_index": None}, {"content_index": True}, {"output_index": "0"}, {"delta": 5}, {"delta": None},
    {"type": "response.refusal.delta"},  # the decoder names it by its open block's kind
    {"type": "response.output_text.annotation.added"},  # the event: line says delta, the data does not
    {"annotations": [{"type": "url_citation", "url": "https://x"}], "extra": {"nested": [1]}},
    {"delta": ""},
], ids=repr)
def test_an_unusual_responses_delta_gives_what_the_decoder_gives(odd: dict[str, Any]) -> None:
    sent = responses_stream(text_delta("Hel", 3), text_delta("lo", 4, **odd), text_delta("!", 5))
    sent[4] = SSEEvent(data=sent[4].data, event="response.output_text.delta")
    both("responses", sent)
    both("responses", [SSEEvent(e.data) for e in sent])


def test_a_responses_delta_with_logprobs_goes_to_the_decoder() -> None:
    logprobs = [{"token": "lo", "logprob": -0.25, "bytes": [108, 111], "top_logprobs": []}]
    sent = responses_stream(text_delta("Hel", 3), text_delta("lo", 4, logprobs=logprobs))
    tap = registry.get("responses").stream_tap(None, "m")
    fed = counting(tap)
    _, events = run(tap, sent)
    assert fed.count("response.output_text.delta") == 1
    logprob = next(e for e in events if isinstance(e, ir.BlockDelta) and e.kind == "logprobs")
    assert logprob.data is not None and logprob.data["content"][0]["logprob"] == -0.25
    assert deltas(events) == ["Hel", "lo"]
    both("responses", sent)


def test_a_responses_delta_after_its_part_is_done_is_malformed_as_before() -> None:
    sent = responses_stream(text_delta("Hel", 3))
    late = [*sent[:6], resp(text_delta("late", 6)), *sent[6:]]  # after content_part.done closed the block
    wire, events = both("responses", late)
    error = next(e for e in events if isinstance(e, ir.Error))
    assert error.transport and "closed" in error.message
    assert events_of(wire)[-1].event == "response.failed"


def reasoning_and_call() -> list[SSEEvent]:
    def summary(index: int, text: str) -> dict[str, Any]:
        return {"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0,
                "summary_index": index, "delta": text, "obfuscation": "pad"}

    def args(text: str) -> dict[str, Any]:
        return {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 1, "delta": text}

    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get", "arguments": ""}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "resp_2", "model": "up-model", "output": []}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"type": "reasoning", "id": "rs_1", "summary": []}},
        {"type": "response.reasoning_summary_part.added", "output_index": 0, "summary_index": 0,
         "part": {"type": "summary_text", "text": ""}},
        summary(0, "Think"), summary(0, "ing"),
        {"type": "response.reasoning_summary_part.added", "output_index": 0, "summary_index": 1,
         "part": {"type": "summary_text", "text": ""}},
        summary(1, "More"), summary(1, "."),
        {"type": "response.output_item.done", "output_index": 0, "item": {
            "type": "reasoning", "id": "rs_1", "encrypted_content": "sig",
            "summary": [{"type": "summary_text", "text": "Thinking"}, {"type": "summary_text", "text": "More."}]}},
        {"type": "response.output_item.added", "output_index": 1, "item": call},
        args('{"q":'), args('"x"}'),
        {"type": "response.function_call_arguments.done", "output_index": 1, "arguments": '{"q":"x"}'},
        {"type": "response.output_item.done", "output_index": 1, "item": {**call, "arguments": '{"q":"x"}'}},
        {"type": "response.completed", "response": {"id": "resp_2", "model": "up-model", "status": "completed",
                                                    "output": [], "usage": {"input_tokens": 3, "output_tokens": 9}}},
    ]
    return [resp(e) for e in events]


def test_responses_reasoning_and_arguments_deltas_are_read_light() -> None:
    sent = reasoning_and_call()
    _, events = both("responses", sent)
    assert deltas(events, "reasoning") == ["Think", "ing", "\n\n", "More", "."]
    assert deltas(events, "arguments") == ['{"q":', '"x"}']
    assert deltas(events, "signature") == ["sig"]
    assert next(e for e in events if isinstance(e, ir.Finish)).reason == ir.FinishReason.TOOL_CALLS
    tap = registry.get("responses").stream_tap(None, "m")
    fed = counting(tap)
    run(tap, sent)
    # The first delta of each summary part is the decoder's (it puts the parts' separator first).
    assert fed.count("response.reasoning_summary_text.delta") == 2
    assert "response.function_call_arguments.delta" not in fed
    for cut in range(len(sent)):
        both("responses", sent[:cut])


def test_a_responses_error_mid_stream_is_read_by_the_decoder() -> None:
    sent = responses_stream(text_delta("Hel", 3), text_delta("lo", 4))[:5]
    sent.append(resp({"type": "error", "sequence_number": 5, "code": "server_error", "message": "boom",
                      "param": None}))
    wire, events = both("responses", sent)
    error = next(e for e in events if isinstance(e, ir.Error))
    assert error.message == "boom" and not error.transport
    assert deltas(events) == ["Hel", "lo"]
    ending = sse.loads(events_of(wire)[-1].data)
    assert ending["type"] == "response.failed" and ending["sequence_number"] == 6


@pytest.mark.parametrize("named", [True, False], ids=["event-lines", "data-only"])
def test_a_truncated_responses_stream_ends_with_the_light_deltas_in_its_output(named: bool) -> None:
    sent = responses_stream(text_delta("Once ", 3), text_delta("upon", 4), named=named)[:5]
    wire, events = both("responses", sent)
    assert any(isinstance(e, ir.Error) and e.transport for e in events)
    failed = sse.loads(events_of(wire)[-1].data)
    assert failed["type"] == "response.failed" and failed["sequence_number"] == 5
    [message] = failed["response"]["output"]
    assert message["status"] == "incomplete" and message["content"][0]["text"] == "Once upon"


def test_responses_refusal_deltas_are_read_light_as_refusal() -> None:
    def refusal(text: str, etype: str = "response.refusal.delta") -> dict[str, Any]:
        return {"type": etype, "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": text}

    part = {"type": "refusal", "refusal": "I can't help."}
    message = {"type": "message", "id": "msg_1", "role": "assistant", "content": [part]}
    wire: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "resp_3", "model": "up-model", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": {**message, "content": []}},
        {"type": "response.content_part.added", "output_index": 0, "content_index": 0,
         "part": {**part, "refusal": ""}},
        refusal("I can't"), refusal(" help", "response.output_text.delta"), refusal("."),
        {"type": "response.refusal.done", "output_index": 0, "content_index": 0, "refusal": "I can't help."},
        {"type": "response.content_part.done", "output_index": 0, "content_index": 0, "part": part},
        {"type": "response.output_item.done", "output_index": 0, "item": message},
        {"type": "response.completed", "response": {"id": "resp_3", "model": "up-model", "status": "completed",
                                                    "output": [message]}},
    ]
    sent = [resp(e) for e in wire]
    tap = registry.get("responses").stream_tap(None, "m")
    fed = counting(tap)
    _, events = run(tap, sent)
    assert "response.refusal.delta" not in fed and "response.output_text.delta" not in fed
    # The block is the refusal part's, whichever delta names it.
    assert deltas(events, "refusal") == ["I can't", " help", "."] and deltas(events) == []
    assert next(e for e in events if isinstance(e, ir.Finish)).reason == ir.FinishReason.REFUSAL
    both("responses", sent)
