"""Property test: whatever valid IR event sequence the encoder is fed, the bytes are a
well-formed Chat Completions stream (and an SDK client accumulates the same thing)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.translation.summary import carried_by, summary_of
from translation import fold, ir
from translation.openai_chat import stream_encoder
from translation.protocol import EncodeContext
from translation.sse import SSEParser

from .sdk_readback import summary_from_stream

F = ir.FinishReason
CTX = EncodeContext(model="client-model", id="chatcmpl-prop", created=1700000000)
VALID_FINISH = {"stop", "length", "tool_calls", "content_filter", "function_call", "error"}

texts = st.text(min_size=0, max_size=12)
fragments = st.sampled_from(['{"a":', ' 1}', "", "{}", "[1, 2]", '"x"', "not json", '{"k": "v"}'])
usages = st.builds(ir.Usage, input_tokens=st.none() | st.integers(0, 10**6),
                   output_tokens=st.none() | st.integers(0, 10**6),
                   cached_tokens=st.none() | st.integers(0, 1000),
                   reasoning_tokens=st.none() | st.integers(0, 1000))
DELTA_KINDS: dict[str, list[ir.DeltaKind]] = {
    "text": ["text", "text", "logprobs", "citation"], "reasoning": ["reasoning", "reasoning", "signature", "redacted"],
    "tool_call": ["arguments"], "server_tool": ["text"], "refusal": ["refusal", "logprobs"],
}


def data_for(draw: st.DrawFn, kind: ir.DeltaKind) -> dict[str, Any] | None:
    """The payload of a logprobs or citation delta (other kinds carry text only)."""

    if kind == "logprobs":
        return {"content": [{"token": t, "logprob": -0.5, "bytes": None, "top_logprobs": []}
                            for t in draw(st.lists(texts, min_size=1, max_size=3))]}
    if kind == "citation":
        return {"type": draw(st.sampled_from(["url_citation", "url_citation", "char_location"])),
                "url": "https://e.x/" + draw(st.from_regex(r"[a-z]{0,4}", fullmatch=True)), "title": "E",
                "start_index": 0, "end_index": draw(st.integers(0, 5)), "raw": {}}
    return None


@st.composite
def block(draw: st.DrawFn, index: int) -> list[ir.Event]:
    kind: ir.BlockKind = draw(st.sampled_from(["text", "reasoning", "tool_call", "server_tool", "refusal"]))
    start = ir.BlockStart(index, kind)
    if kind == "tool_call":
        start.id = draw(st.none() | st.from_regex(r"call_[a-z0-9]{1,8}", fullmatch=True))
        start.name = draw(st.from_regex(r"[a-z_]{1,10}", fullmatch=True))
    if kind == "server_tool":
        start.raw = {"type": "web_search_call"}
        start.raw_protocol = draw(st.sampled_from(["anthropic", "responses"]))
    events: list[ir.Event] = [start]
    for _ in range(draw(st.integers(0, 4))):
        delta_kind = draw(st.sampled_from(DELTA_KINDS[kind]))
        data = data_for(draw, delta_kind)
        text = "" if data is not None else draw(fragments if delta_kind == "arguments" else texts)
        events.append(ir.BlockDelta(index, delta_kind, text, data=data))
        if draw(st.integers(0, 5)) == 0:
            events.append(draw(usages))
    events.append(ir.BlockStop(index))
    return events


@st.composite
def ir_streams(draw: st.DrawFn) -> list[ir.Event]:
    events: list[ir.Event] = [ir.MessageStart(id="up", model="up-model", usage=draw(st.none() | usages))]
    for index in range(draw(st.integers(0, 5))):
        events += draw(block(index))
    if draw(st.booleans()):
        events.append(draw(usages))
    ending = draw(st.sampled_from(["finish", "finish+usage", "error", "finish+error", "nothing", "open-block"]))
    if ending == "open-block":
        n = len([e for e in events if isinstance(e, ir.BlockStart)])
        events += [ir.BlockStart(n, "text"), ir.BlockDelta(n, "text", draw(texts))]
    if ending.startswith("finish"):
        events.append(ir.Finish(draw(st.sampled_from(list(F))), raw=draw(st.none() | st.sampled_from(
            ["stop", "end_turn", "tool_calls", "function_call", "max_tokens", "weird"]))))
    if ending == "finish+usage":
        events.append(draw(usages))
    if ending.endswith("error"):
        events.append(ir.Error(message=draw(st.text(min_size=1, max_size=20)),
                               error_type=draw(st.sampled_from(["api_error", "rate_limit_error"])),
                               status=draw(st.sampled_from([429, 500, 502, 529])),
                               code=draw(st.none() | st.just("code"))))
    return events


def encode_parts(events: list[ir.Event]) -> list[bytes]:
    encoder = stream_encoder(CTX)
    out: list[bytes] = []
    for event in events:
        out += encoder.feed(event)
    return out + encoder.finish()


def validate(parts: list[bytes]) -> list[dict[str, Any]]:
    """The Chat stream rules; returns the chunks."""

    parser = SSEParser()
    events = []
    for part in parts:
        got = parser.feed(part)
        assert len(got) == 1, "every element is exactly one complete SSE event"
        events += got
    assert parser.finish() == []
    assert all(e.event is None for e in events), "Chat streams have no event: lines"
    datas = [e.data for e in events]
    assert datas.count("[DONE]") == 1 and datas[-1] == "[DONE]", "one terminator, nothing after it"
    chunks = [json.loads(d) for d in datas[:-1]]
    assert chunks, "at least the role chunk and the final chunk"
    for c in chunks:
        assert (c["id"], c["object"], c["created"], c["model"]) == (
            "chatcmpl-prop", "chat.completion.chunk", 1700000000, "client-model")
        assert len(c["choices"]) == 1 and c["choices"][0]["index"] == 0
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all("role" not in c["choices"][0]["delta"] for c in chunks[1:])
    finishes = [c["choices"][0]["finish_reason"] for c in chunks]
    assert all(f is None for f in finishes[:-1]) and finishes[-1] in VALID_FINISH
    assert all("usage" not in c and "error" not in c for c in chunks[:-1])
    last = chunks[-1]
    assert last["choices"][0]["delta"] == {}
    if finishes[-1] == "error" and "error" in last:
        assert isinstance(last["error"]["message"], str) and "type" in last["error"]
    started = -1
    for c in chunks[1:-1]:
        for call in c["choices"][0]["delta"].get("tool_calls", []):
            if "id" in call:
                assert call["index"] == started + 1, "tool call indexes start at 0 and increase by 1"
                assert call["type"] == "function" and call["function"]["arguments"] == ""
                assert isinstance(call["id"], str) and call["id"]
                started = call["index"]
            else:
                assert call["index"] == started, "fragments only for the latest started call"
                assert set(call) == {"index", "function"} and set(call["function"]) == {"arguments"}
    return chunks


def accumulated(chunks: list[dict[str, Any]], key: str) -> str:
    return "".join(c["choices"][0]["delta"].get(key) or "" for c in chunks)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ir_streams())
def test_encoder_output_is_a_well_formed_chat_stream(events: list[ir.Event]) -> None:
    chunks = validate(encode_parts(events))
    resp = fold.fold(events)
    failed = resp.error is not None or resp.finish is None
    assert (chunks[-1]["choices"][0]["finish_reason"] == "error") == (failed or resp.finish.reason is F.ERROR)  # type: ignore[union-attr]
    assert ("error" in chunks[-1]) == failed
    assert accumulated(chunks, "content") == "".join(b.text for b in resp.blocks if b.kind == "text")
    assert accumulated(chunks, "reasoning_content") == "".join(b.text for b in resp.blocks if b.kind == "reasoning")
    calls = [call for c in chunks for call in c["choices"][0]["delta"].get("tool_calls", [])]
    args = ["".join(c["function"]["arguments"] for c in calls if c["index"] == n)
            for n in range(len([c for c in calls if "id" in c]))]
    assert args == [b.text for b in resp.blocks if b.kind == "tool_call"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ir_streams())
def test_sdk_accumulates_what_was_encoded(events: list[ir.Event]) -> None:
    resp = fold.fold(events)
    want = carried_by("openai_chat", summary_of(resp))
    got = summary_from_stream(b"".join(encode_parts(events)))
    calls = [b for b in resp.blocks if b.kind == "tool_call"]
    assert len(got.tool_calls) == len(calls)
    # a call without an id gets one from the encoder: take it from what the client saw
    want = replace(want, signatures=[], tool_calls=[
        (b.id or seen[0], name, args) for b, seen, (_, name, args) in zip(calls, got.tool_calls, want.tool_calls)])
    if resp.error is not None or resp.finish is None:
        assert got.error is not None
        assert (got.text, got.reasoning, got.tool_calls) == (want.text, want.reasoning, want.tool_calls)
        return
    want.finish = {F.PAUSE: F.STOP, F.ERROR: None}.get(want.finish, want.finish)  # type: ignore[arg-type]
    if all(v is None for v in (want.input_tokens, want.output_tokens, want.cached_tokens, want.reasoning_tokens)):
        assert (got.input_tokens, got.output_tokens) == (None, None)
    else:
        want = replace(want, input_tokens=want.input_tokens or 0, output_tokens=want.output_tokens or 0)
    assert got == want
