"""The same-protocol tap: what it forwards is the upstream's, and however the upstream breaks off,
what it adds makes a stream the official SDK reads to an end (an answer or an error, never a hang)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from tests.fixtures.recorded_loader import Recording, recordings
from translation import ir, registry, sse
from translation.passthrough import ModelRewrite, model_rewrite
from translation.sse import SSEEvent

COMPLETE = {
    "anthropic": "anthropic-json-tool.2.chunks.txt",
    "openai_chat": "deepseek-tool-call.chunks.txt",
    "responses": "test_openai_responses_phase_streamed_on_part_start.yaml#0",
}


def recording(proto: str) -> Recording:
    return next(r for r in recordings(proto, stream=True) if r.name.endswith(COMPLETE[proto]))


def readback(proto: str) -> Any:
    return importlib.import_module(f"tests.translation.{proto}.sdk_readback")


def events_of(wire: bytes) -> list[SSEEvent]:
    parser = sse.SSEParser()
    return parser.feed(wire) + parser.finish()


def run_tap(proto: str, events: list[SSEEvent], rewrite: ModelRewrite | None = None,
            error: ir.Error | None = None) -> tuple[bytes, list[ir.Event]]:
    """Forward ``events`` through a fresh tap, then end the stream as the gateway does."""

    tap = registry.get(proto).stream_tap(rewrite, "client-model")
    wire, decoded = [], []
    for event in events:
        out, data = tap.feed(event)
        decoded.extend(out)
        wire.append(data)
    if error is None:
        decoded.extend(tap.finish())
        transport = next((e for e in decoded if isinstance(e, ir.Error) and e.transport), None)
        wire.append(tap.ending(transport if isinstance(transport, ir.Error) else None))
    else:
        wire.append(tap.ending(error))
    return b"".join(wire), decoded


@pytest.mark.parametrize("proto", sorted(COMPLETE))
def test_a_complete_stream_is_forwarded_event_for_event_with_nothing_added(proto: str) -> None:
    sent = events_of(recording(proto).body)
    wire, decoded = run_tap(proto, sent)
    assert [(e.event, e.data) for e in events_of(wire)] == [(e.event, e.data) for e in sent]
    assert any(isinstance(e, ir.Finish) for e in decoded)
    assert not any(isinstance(e, ir.Error) for e in decoded)


@pytest.mark.parametrize("proto", sorted(COMPLETE))
def test_a_stream_cut_anywhere_still_ends_in_its_protocol(proto: str) -> None:
    sdk = readback(proto)
    sent = events_of(recording(proto).body)
    whole = sdk.summary_from_stream(recording(proto).body)
    assert whole.error is None
    for cut in range(len(sent)):
        wire, _ = run_tap(proto, sent[:cut])
        summary = sdk.summary_from_stream(wire)  # raises or hangs if the ending is not well-formed
        received = events_of(wire)
        assert [(e.event, e.data) for e in received[:cut]] == [(e.event, e.data) for e in sent[:cut]]
        if summary.error is None:
            # Only a stream that had already finished may read as a success, and then as the whole answer.
            assert summary.text == whole.text and summary.tool_calls == whole.tool_calls, cut
        else:
            assert whole.text.startswith(summary.text), cut


@pytest.mark.parametrize("proto", sorted(COMPLETE))
def test_a_malformed_event_is_not_forwarded_and_the_stream_ends_there(proto: str) -> None:
    sent = events_of(recording(proto).body)
    broken = [*sent[:3], SSEEvent(data="{not json", event=sent[3].event), *sent[3:]]
    wire, decoded = run_tap(proto, broken)
    received = events_of(wire)
    assert not any(e.data == "{not json" for e in received)
    assert [(e.event, e.data) for e in received[:3]] == [(e.event, e.data) for e in sent[:3]]
    assert any(isinstance(e, ir.Error) and e.transport for e in decoded)
    assert readback(proto).summary_from_stream(wire).error is not None
    assert len(received) <= 3 + 6  # nothing of the upstream after the bad event, only the ending


@pytest.mark.parametrize("proto", sorted(COMPLETE))
def test_a_connection_lost_midway_gets_the_error_ending_with_its_message(proto: str) -> None:
    sent = events_of(recording(proto).body)
    lost = ir.Error("upstream connection lost (ClientPayloadError)", error_type="upstream_disconnected")
    wire, _ = run_tap(proto, sent[:4], error=lost)
    summary = readback(proto).summary_from_stream(wire)
    assert summary.error is not None and "connection lost" in summary.error


def test_a_chat_error_ending_keeps_the_stream_id_and_the_error_code() -> None:
    sent = events_of(recording("openai_chat").body)
    err = ir.Error("too long", error_type="invalid_request_error", status=400, code="context_length_exceeded",
                   param="messages")
    wire, _ = run_tap("openai_chat", sent[:3], error=err)
    last = sse.loads(events_of(wire)[-2].data)
    assert last["id"] == sse.loads(sent[0].data)["id"]
    assert last["error"]["code"] == "context_length_exceeded" and last["error"]["param"] == "messages"


def test_a_responses_failure_names_the_upstream_response_and_the_next_sequence_number() -> None:
    sent = events_of(recording("responses").body)
    wire, _ = run_tap("responses", sent[:5], error=ir.Error("gone", error_type="upstream_disconnected"))
    failed = events_of(wire)[-1]
    assert failed.event == "response.failed"
    body = sse.loads(failed.data)
    created = sse.loads(sent[0].data)
    assert body["response"]["id"] == created["response"]["id"]
    assert body["sequence_number"] == sse.loads(sent[4].data)["sequence_number"] + 1


def test_an_anthropic_ending_stops_the_blocks_the_upstream_left_open() -> None:
    sent = events_of(recording("anthropic").body)
    cut = next(i for i, e in enumerate(sent) if e.event == "content_block_delta") + 1
    wire, _ = run_tap("anthropic", sent[:cut])
    added = events_of(wire)[cut:]
    assert [e.event for e in added] == ["content_block_stop", "error", "message_stop"]
    opened = sse.loads(next(e for e in sent if e.event == "content_block_start").data)["index"]
    assert sse.loads(added[0].data)["index"] == opened


@pytest.mark.parametrize("proto", sorted(COMPLETE))
def test_the_model_the_gateway_sent_is_reported_as_the_one_the_client_asked_for(proto: str) -> None:
    sent = events_of(recording(proto).body)
    upstream_model = next(m for m in (_model_of(e) for e in sent) if m)
    wire, _ = run_tap(proto, sent, model_rewrite(upstream_model, "my-alias"))
    models = [m for m in (_model_of(e) for e in events_of(wire)) if m]
    assert models and set(models) == {"my-alias"}
    untouched, _ = run_tap(proto, sent, model_rewrite("some-other-name", "my-alias"))
    assert untouched.count(b"my-alias") == 0


def test_a_chat_chunk_labelled_as_a_whole_completion_is_relabelled() -> None:
    chunk = ('{"id":"c1","object":"chat.completion","created":1,"model":"m",'
             '"choices":[{"index":0,"delta":{"content":"\\"object\\":\\"chat.completion\\""},"finish_reason":null}]}')
    wire, _ = run_tap("openai_chat", [SSEEvent(chunk)])
    data = sse.loads(events_of(wire)[0].data)
    assert data["object"] == "chat.completion.chunk"
    assert data["choices"][0]["delta"]["content"] == '"object":"chat.completion"'


def _model_of(event: SSEEvent) -> str | None:
    try:
        data = sse.loads(event.data)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    for holder in (data, data.get("message"), data.get("response")):
        if isinstance(holder, dict) and isinstance(holder.get("model"), str):
            return str(holder["model"])
    return None
