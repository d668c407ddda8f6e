"""The SSE parser gives the same events whatever the chunking; the encoder frames one event."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from translation import sse
from translation.sse import SSEEvent, SSEParser

WIRE = (
    b"event: message_start\n"
    b'data: {"type":"message_start"}\n\n'
    b": keepalive\n\n"
    b'data: {"a":1}\r\n\r\n'
    b"data: line one\rdata: line two\r\r"
    b"event: ping\ndata:{\"type\": \"ping\"}\n\n"
    b"id: 7\nretry: 100\ndata: x\n\n"
)
EXPECTED = [
    SSEEvent('{"type":"message_start"}', "message_start"),
    SSEEvent('{"a":1}'),
    SSEEvent("line one\nline two"),
    SSEEvent('{"type": "ping"}', "ping"),
    SSEEvent("x", None, "7"),
]


def parse_all(chunks: list[bytes]) -> list[SSEEvent]:
    p = SSEParser()
    out: list[SSEEvent] = []
    for c in chunks:
        out.extend(p.feed(c))
    out.extend(p.finish())
    return out


def test_parses_lf_crlf_cr_comments_multiline_and_optional_event_lines() -> None:
    assert parse_all([WIRE]) == EXPECTED


def test_counts_comments() -> None:
    p = SSEParser()
    p.feed(b": one\n\n: two\n\n")
    assert p.comments == 2


def test_every_single_cut_gives_the_same_events() -> None:
    for i in range(len(WIRE) + 1):
        assert parse_all([WIRE[:i], WIRE[i:]]) == EXPECTED, i


def test_byte_at_a_time_gives_the_same_events() -> None:
    assert parse_all([WIRE[i:i + 1] for i in range(len(WIRE))]) == EXPECTED


@settings(max_examples=300)
@given(st.lists(st.integers(min_value=0, max_value=len(WIRE)), max_size=30))
def test_any_chunking_gives_identical_events(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    chunks = [WIRE[a:b] for a, b in zip([0] + points, points + [len(WIRE)])]
    assert parse_all(chunks) == EXPECTED


event_names = st.one_of(st.none(), st.text(alphabet="abcdefghijklmnopqrstuvwxyz._", min_size=1, max_size=20))
payloads = st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=50)


@settings(max_examples=200)
@given(st.lists(st.tuples(event_names, payloads), min_size=1, max_size=8), st.data())
def test_encoded_events_round_trip_through_any_chunking(events: list[tuple[str | None, str]], data: st.DataObject) -> None:
    wire = b"".join(sse.encode(name, {"p": text}) for name, text in events)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(wire)), max_size=20))))
    chunks = [wire[a:b] for a, b in zip([0] + cuts, cuts + [len(wire)])]
    got = parse_all(chunks)
    assert [(e.event, sse.loads(e.data)["p"]) for e in got] == events


def test_line_over_one_megabyte_in_network_sized_chunks() -> None:
    big = "x" * (3 * 1024 * 1024)
    wire = sse.encode("content_block_delta", {"text": big}) + sse.encode(None, {"n": 2})
    got = parse_all([wire[i:i + 65536] for i in range(0, len(wire), 65536)])
    assert len(got) == 2
    assert sse.loads(got[0].data)["text"] == big
    assert got[0].event == "content_block_delta"


def test_last_event_without_blank_line_is_delivered_at_end_of_stream() -> None:
    assert parse_all([b'data: {"partial": tr']) == [SSEEvent('{"partial": tr')]


def test_encode_puts_json_on_one_line_and_ends_with_a_blank_line() -> None:
    out = sse.encode("x", {"text": "a\nb"})
    assert out == b'event: x\ndata: {"text":"a\\nb"}\n\n'
    assert sse.encode(None, {"a": 1}) == b'data: {"a":1}\n\n'
    assert sse.DONE == b"data: [DONE]\n\n"
    assert sse.comment() == b": keepalive\n\n"


def test_whole_events_in_a_chunk_read_as_line_by_line() -> None:
    # A chunk of whole events takes the parser's short path; byte by byte takes the line path.
    from tests.fixtures.recorded_loader import recordings

    for rec in recordings(stream=True):
        events = rec.body.split(b"\n\n")
        per_event = [e + b"\n\n" for e in events[:-1]] + ([events[-1]] if events[-1] else [])
        by_byte = parse_all([rec.body[i:i + 1] for i in range(len(rec.body))])
        assert parse_all(per_event) == by_byte, rec.name
        assert parse_all([rec.body]) == by_byte, rec.name


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from([None, "", "message_start", "x y", "é"]),
                          st.sampled_from(["", " ", "{}", " {\"a\": \"b\"} ", "data: no", "é\u2028"]),
                          st.sampled_from(["event: {}\ndata: {}", "event:{}\ndata:{}", "data: {}", "data:{}",
                                           ": c\ndata: {}", "id: 3\ndata: {}", "data: {}\ndata: {}", "data"])),
                min_size=1, max_size=5))
def test_the_short_path_gives_what_the_line_path_gives(blocks: list[tuple[str | None, str, str]]) -> None:
    wire = b""
    for name, data, shape in blocks:
        text = shape.format(name or "", data) if shape.startswith("event") else shape.format(data, data)
        wire += text.encode() + b"\n\n"
    assert parse_all([wire]) == parse_all([wire[i:i + 1] for i in range(len(wire))])


def test_a_chunk_of_whole_events_past_the_bound_is_still_refused() -> None:
    import pytest

    p = SSEParser(max_event_bytes=16)
    with pytest.raises(sse.EventTooLarge):
        p.feed(b"data: " + b"x" * 40 + b"\n\n")
