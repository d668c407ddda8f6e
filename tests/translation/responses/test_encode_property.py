"""Random valid IR streams always make a well-formed Responses stream that the SDK reads
back as the same answer (within what Responses can express)."""

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.translation.responses.helpers import same_summary, validate_wire
from tests.translation.responses.sdk_readback import summary_from_stream
from tests.translation.summary import Summary, carried_by, summary_of
from translation import ir, responses
from translation.fold import fold
from translation.protocol import EncodeContext
from translation.encoder_base import NO_FINISH

R = ir.FinishReason
TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12)
USAGE = st.builds(ir.Usage, *(st.none() | st.integers(0, 10_000) for _ in range(5)))
LOGPROBS = st.builds(lambda tokens: {"content": [{"token": t, "logprob": -0.5, "bytes": None, "top_logprobs": []}
                                                for t in tokens]}, st.lists(TEXT, min_size=1, max_size=3))
CITATIONS = st.builds(lambda kind, end: {"type": kind, "url": "https://e.x/", "title": "E", "start_index": 0,
                                         "end_index": end, "raw": {"type": kind}},
                      st.sampled_from(["url_citation", "url_citation", "page_location"]), st.integers(0, 5))
DATA = {"logprobs": LOGPROBS, "citation": CITATIONS}
DELTAS = {
    "text": st.lists(st.tuples(st.sampled_from(["text", "text", "logprobs", "citation"]), TEXT), max_size=4),
    "refusal": st.lists(st.tuples(st.just("refusal"), TEXT), max_size=3),
    "reasoning": st.lists(st.tuples(st.sampled_from(["reasoning", "reasoning", "signature", "redacted"]), TEXT),
                          max_size=5),
    "tool_call": st.lists(st.tuples(st.just("arguments"), TEXT), max_size=4),
    "server_tool": st.lists(st.tuples(st.just("text"), TEXT), max_size=2),
}


@st.composite
def ir_streams(draw) -> list[ir.Event]:
    events: list[ir.Event] = [ir.MessageStart(id=draw(st.none() | TEXT), model=draw(st.none() | TEXT),
                                              usage=draw(st.none() | USAGE))]
    kinds = draw(st.lists(st.sampled_from(["text", "reasoning", "tool_call", "server_tool", "refusal"]), max_size=5))
    for index, kind in enumerate(kinds):
        if draw(st.booleans()):
            events.append(draw(USAGE))
        start = ir.BlockStart(index, kind)
        if kind == "tool_call":
            start = ir.BlockStart(index, kind, id=f"call_{index}", name=draw(st.sampled_from(["f", "get_weather"])))
        elif kind == "reasoning":
            start = ir.BlockStart(index, kind, id=draw(st.sampled_from([None, f"rs_{index}", "thinking"])))
        elif kind == "server_tool":
            raw = {"type": "web_search_call", "id": f"ws_{index}", "status": "completed",
                   "action": {"type": "search", "query": "q"}}
            start = ir.BlockStart(index, kind, raw=raw, raw_protocol=draw(st.sampled_from(["responses", "anthropic"])))
        events.append(start)
        events.extend(ir.BlockDelta(index, dk, text) if dk not in DATA else
                      ir.BlockDelta(index, dk, "", data=draw(DATA[dk])) for dk, text in draw(DELTAS[kind]))
        last_open = index == len(kinds) - 1 and draw(st.integers(0, 4)) == 0
        if not last_open:
            events.append(ir.BlockStop(index))
    ending = draw(st.sampled_from(["finish", "finish", "error", "nothing"]))
    if ending == "finish" and isinstance(events[-1], ir.BlockStop | ir.MessageStart | ir.Usage):
        events.append(ir.Finish(draw(st.sampled_from(list(R))), raw=draw(st.none() | TEXT)))
    elif ending == "error":
        events.append(ir.Error(message=draw(TEXT) or "boom", status=draw(st.sampled_from([400, 429, 500, 529]))))
    if draw(st.booleans()):
        events.append(draw(USAGE))
    return events


def expected(events: list[ir.Event]) -> Summary:
    """The IR's summary as Responses can say it: no pause or error finish reason, completed
    means tool calls exactly when there are function calls, a stream without an ending
    fails, and an error ends the stream at once (usage after it is not reported)."""

    errors = [i for i, e in enumerate(events) if isinstance(e, ir.Error)]
    resp = fold(events[:errors[0] + 1] if errors else events)
    s = carried_by("responses", summary_of(resp))
    has_calls = any(b.kind == "tool_call" for b in resp.blocks)
    if resp.error is not None:
        return dataclasses.replace(s, finish=None)
    if resp.finish is None:
        return dataclasses.replace(s, error=NO_FINISH)
    if resp.finish.reason == R.ERROR:
        return dataclasses.replace(s, finish=None, error="upstream finished with an error")
    if s.finish in (R.STOP, R.TOOL_CALLS, R.PAUSE):
        return dataclasses.replace(s, finish=R.TOOL_CALLS if has_calls else R.STOP)
    return s


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ir_streams())
def test_random_ir_streams_encode_to_well_formed_responses_sse(events):
    encoder = responses.stream_encoder(EncodeContext(model="client-model"))
    chunks: list[bytes] = []
    terminal_seen = False
    for event in events:
        out = encoder.feed(event)
        if terminal_seen:
            assert out == [], "nothing after the terminal event"
        chunks.extend(out)
        terminal_seen = terminal_seen or any(b.startswith(b"event: response.failed") for b in out)
    tail = encoder.finish()
    assert encoder.finish() == [] and encoder.feed(ir.Usage(input_tokens=1)) == []
    chunks.extend(tail)
    assert all(c.endswith(b"\n\n") and c.count(b"\n\n") == 1 for c in chunks), "one SSE event per element"
    wire = b"".join(chunks)
    validate_wire(wire)
    same_summary(summary_from_stream(wire), expected(events))
