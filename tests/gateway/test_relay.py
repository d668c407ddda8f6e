"""The upstream stream reader on a fake upstream body: batches per read, idle timeout, a lost
connection, an abort when the gateway stops, and where reading until content stops."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from gateway.exchange.idle import STALLED, IdlePolicy
from gateway.exchange.relay import (
    TIMEOUT,
    Batch,
    Decoding,
    OpenStreams,
    Tapping,
    UpstreamStream,
    read_until_content,
)
from gateway.options import Options
from tests.gateway.fakes import (
    FakeResponse,
    FakeUpstream,
    Reply,
    account,
    chat_body,
    chat_stream,
    chat_text,
    chunk,
    events,
    exchange,
    provider,
    rig,
    run,
    snapshot,
    sse,
    sse_reply,
    stream_of,
)
from translation import ir, registry

CHAT = registry.get("openai_chat")


def tapped(reply: Reply, idle: float = 5.0, streams: OpenStreams | None = None) -> tuple[UpstreamStream, FakeResponse]:
    response = FakeResponse(reply)
    return UpstreamStream(response, Tapping(CHAT.stream_tap(None, "m-1")), IdlePolicy(idle, 10.0), streams), response


def decoded(reply: Reply, idle: float = 5.0, keepalive: float = 10.0) -> tuple[UpstreamStream, FakeResponse]:
    response = FakeResponse(reply)
    return UpstreamStream(response, Decoding(CHAT.stream_decoder()), IdlePolicy(idle, keepalive)), response


async def drain(stream: UpstreamStream, wait: float = 1.0) -> list[Batch | str | None]:
    out: list[Batch | str | None] = []
    while True:
        item = await stream.next(wait)
        out.append(item)
        if item is None or item == TIMEOUT:
            return out


def errors(batch: Batch | str | None) -> list[ir.Error]:
    return [e for e in batch.events if isinstance(e, ir.Error)] if isinstance(batch, Batch) else []


def test_what_one_read_brought_is_one_batch_and_an_event_cut_between_reads_arrives_whole() -> None:
    one, two, three, four = (chunk({"content": t}) for t in ("a", "b", "c", "d"))
    first, last = sse(one, two), sse(three, four, "[DONE]")
    reads: list[bytes | float] = [first + last[:10], last[10:]]

    async def work() -> list[Batch | str | None]:
        stream, _ = tapped(Reply(200, reads))
        return await drain(stream)

    got = run(work)
    assert got[-1] is None and all(isinstance(b, Batch) for b in got[:-1])
    wires = [b.wire for b in got[:-1] if isinstance(b, Batch) and b.wire]
    assert len(wires) == 2  # two reads, two writes to the client
    assert [d for _, d in events(wires[0])] == [one, two]
    assert [d for _, d in events(wires[1])] == [three, four]  # [DONE] is written by the stream's ending


def test_nothing_within_the_wait_is_a_timeout_and_what_comes_later_still_arrives() -> None:
    async def work() -> tuple[Any, Any]:
        stream, _ = decoded(Reply(200, [0.2, sse(chunk({"content": "late"}))]))
        return await stream.next(0.02), await stream.next(1.0)

    early, late = run(work)
    assert early == TIMEOUT
    assert isinstance(late, Batch) and any(isinstance(e, ir.BlockDelta) for e in late.events)


def test_a_connection_lost_mid_body_is_a_local_transport_error_then_the_end() -> None:
    async def work() -> tuple[list[Batch | str | None], FakeResponse]:
        stream, response = decoded(sse_reply(chunk({"content": "half"}), lost=True))
        return await drain(stream), response

    got, response = run(work)
    assert got[-1] is None
    lost = [b for b in got if errors(b)]
    assert len(lost) == 1 and isinstance(lost[0], Batch) and lost[0].local
    (err,) = errors(lost[0])
    assert err.transport and err.error_type == ir.TransportFailure.DISCONNECTED
    assert response.closed


def test_aborting_a_stream_ends_it_with_a_local_overloaded_error_and_drops_the_upstream() -> None:
    async def work() -> tuple[list[Batch | str | None], FakeResponse, UpstreamStream]:
        streams = OpenStreams()
        stream, response = tapped(sse_reply(chunk({"content": "a"}), stall=True), streams=streams)
        first = await stream.next(1.0)
        assert len(streams) == 1
        streams.abort_all("The gateway is shutting down")
        rest = await drain(stream)
        await asyncio.sleep(0)
        return [first, *rest], response, stream

    got, response, stream = run(work)
    assert stream.aborted and got[-1] is None and response.closed
    aborted = [b for b in got if errors(b)]
    assert len(aborted) == 1 and isinstance(aborted[0], Batch) and aborted[0].local
    (err,) = errors(aborted[0])
    assert (err.status, err.error_type, err.transport) == (503, "overloaded_error", False)


def test_closing_a_stream_drops_the_upstream_connection() -> None:
    async def work() -> FakeResponse:
        stream, response = decoded(sse_reply(chunk({"content": "a"}), stall=True))
        await stream.next(1.0)
        stream.close()
        await asyncio.sleep(0.01)
        return response

    response = run(work)
    assert response.closed and not response.read_to_end


def until_content(reply: Reply, wait: float = 1.0, idle: float = 5.0) -> tuple[list[Batch], str]:
    async def work() -> tuple[list[Batch], str]:
        stream, _ = decoded(reply, idle, keepalive=wait)
        try:
            return await read_until_content(stream)
        finally:
            stream.close()

    return run(work)


def test_reading_until_content_stops_at_the_first_content() -> None:
    batches, why = until_content(Reply(200, [sse(chunk({"role": "assistant"})), sse(chunk({"content": "x"})),
                                             sse(chunk({"content": "never read yet"}))]))
    assert why == "content"
    assert sum(isinstance(e, ir.BlockDelta) for b in batches for e in b.events) == 1


def test_reading_until_content_stops_at_an_error_event() -> None:
    batches, why = until_content(sse_reply(chunk({}, None, error={"code": 429, "message": "slow down"})))
    assert why == "error"
    (err,) = [e for b in batches for e in b.events if isinstance(e, ir.Error)]
    assert err.status == 429 and not err.transport


def test_an_empty_stream_body_is_a_truncation_not_an_answer() -> None:
    batches, why = until_content(Reply(200, []))
    assert why == "error"
    (err,) = [e for b in batches for e in b.events if isinstance(e, ir.Error)]
    assert err.transport and err.error_type == ir.TransportFailure.TRUNCATED


def test_reading_until_content_gives_up_waiting_but_not_the_stream_within_its_idle_timeout() -> None:
    batches, why = until_content(Reply(200, [0.3, sse(chunk({"content": "x"}))]), wait=0.03, idle=5.0)
    assert (batches, why) == ([], "wait")


def test_reading_until_content_past_the_idle_timeout_is_a_timeout_error() -> None:
    batches, why = until_content(Reply(200, [], stall=True), wait=5.0, idle=0.03)
    assert why == "error"
    (err,) = [e for b in batches for e in b.events if isinstance(e, ir.Error)]
    assert err.transport and err.error_type == ir.TransportFailure.TIMEOUT and err.status == 504


# ----------------------------------------------------------------- what the client sees (through dispatch)


def test_upstream_silence_past_the_idle_timeout_after_content_ends_the_clients_stream_with_an_error() -> None:
    prov = provider(idle_timeout=0.1)
    r = rig(snapshot([prov]), [account(1, "sk-one")],
            FakeUpstream({"sk-one": sse_reply(*chat_stream("partial")[:2], stall=True)}))
    ex = exchange("openai_chat", chat_body(stream=True), prov)
    got = events(run(lambda: stream_of(r, ex)))
    assert got[-1] == (None, "[DONE]") and "error" in got[-2][1]
    assert r.log.records[0].error_class == "upstream_timeout"
    assert r.upstream.calls[0].response is not None and r.upstream.calls[0].response.closed


def test_silence_longer_than_the_keepalive_gets_comments_and_the_stream_still_completes() -> None:
    prov = provider()
    parts = chat_stream("one", "two")
    body: list[bytes | float] = [sse(*parts[:2]), 0.15, sse(*parts[2:])]
    r = rig(snapshot([prov]), [account(1, "sk-one")], FakeUpstream({"sk-one": Reply(200, body)}),
            Options(keepalive_seconds=0.03))
    raw = run(lambda: stream_of(r, exchange("openai_chat", chat_body(stream=True), prov)))
    assert chat_text(raw) == "onetwo" and raw.endswith(b"data: [DONE]\n\n")
    comments = [line for line in raw.split(b"\n") if line.startswith(b":")]
    assert len(comments) >= 2
    assert orjson.loads(raw.split(b"data: ", 2)[1].split(b"\n")[0])["choices"][0]["delta"]["role"] == "assistant"


ACCOUNT_KEY = "sk-acct/1234567890"
ECHO = '{"error":{"message":"key sk-acct\\/12345\\u0036\\u00378\\u0039\\u0030 is over its quota","type":"insufficient_quota"}}'


def test_an_error_event_passed_through_mid_stream_loses_the_accounts_key_in_any_spelling() -> None:
    from translation.sse import SSEEvent

    batch = Tapping(CHAT.stream_tap(None, "m-1"), ACCOUNT_KEY).read([SSEEvent(data=ECHO)])
    forwarded = orjson.loads(batch.wire.split(b"data: ", 1)[1].split(b"\n", 1)[0])
    assert forwarded["error"]["message"] == "key [redacted] is over its quota"
    assert "1234567" not in str(forwarded) and "1234567" not in str(batch.events)


def test_an_error_event_translated_mid_stream_loses_the_accounts_key() -> None:
    from translation.sse import SSEEvent

    batch = Decoding(CHAT.stream_decoder(), ACCOUNT_KEY).read([SSEEvent(data=ECHO)])
    assert errors(batch) and all("1234567" not in e.message and "[redacted]" in e.message for e in errors(batch))


def test_a_stall_before_and_after_the_first_content_is_one_504_in_one_message() -> None:
    batches, why = until_content(Reply(200, [], stall=True), wait=5.0, idle=0.03)
    before = batches[0].events[0]
    prov = provider(idle_timeout=0.1)
    r = rig(snapshot([prov]), [account(1, "sk-one")],
            FakeUpstream({"sk-one": sse_reply(*chat_stream("partial")[:2], stall=True)}))
    got = events(run(lambda: stream_of(r, exchange("openai_chat", chat_body(stream=True), prov))))
    after = got[-2][1]["error"]
    assert isinstance(before, ir.Error) and (before.status, why) == (504, "error")
    assert after["message"] == before.message == STALLED
