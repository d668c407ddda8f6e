"""The dispatch loop on a fake pool and a fake upstream: which accounts it tries, what it disables,
what the client gets and what the request log says it did."""

from __future__ import annotations

import datetime as dt

import orjson
import pytest
from django.utils import timezone

from accounts.db import DatabaseUnavailable
from accounts.outcomes import ErrorClass, Verdict
from gateway.errors import NoAccounts, Unavailable, UpstreamFailed, UpstreamUnavailable
from gateway.exchange.dispatch import dispatch
from gateway.options import Options
from gateway.state import ProviderInfo
from tests.gateway.fakes import (
    FakeUpstream,
    Reply,
    Rig,
    account,
    anthropic_body,
    body_of,
    chat_answer,
    chat_body,
    chat_stream,
    chat_text,
    chunk,
    error_reply,
    events,
    exchange,
    json_reply,
    provider,
    refused,
    rig,
    run,
    snapshot,
    sse_reply,
    stream_of,
)


def three_accounts(script: dict[str, Reply], prov: ProviderInfo | None = None) -> tuple[Rig, ProviderInfo]:
    prov = prov or provider()
    accounts = [account(1, "sk-one"), account(2, "sk-two"), account(3, "sk-three")]
    return rig(snapshot([prov]), accounts, FakeUpstream(script)), prov


# ----------------------------------------------------------------- which accounts, what verdicts


def test_429_then_401_disables_both_and_the_third_account_answers() -> None:
    r, prov = three_accounts({"sk-one": error_reply(429, "Rate limited", "rate_limit_error", retry_after="30"),
                              "sk-two": error_reply(401, "Invalid key", "authentication_error"),
                              "sk-three": json_reply(chat_answer("from three"))})
    ex = exchange("openai_chat", chat_body(), prov)
    before = timezone.now()
    response = run(lambda: dispatch(r.gw, ex))

    assert response.status == 200
    assert orjson.loads(run(lambda: body_of(response)))["choices"][0]["message"]["content"] == "from three"
    assert r.upstream.secrets == ["sk-one", "sk-two", "sk-three"]
    assert set(r.pool.disabled) == {1, 2}
    cooled = r.pool.disabled[1].cooldown_until
    assert cooled is not None and dt.timedelta(seconds=29) < cooled - before < dt.timedelta(seconds=32)
    assert r.pool.disabled[2].cooldown_until is None  # a bad key has no end of cool-down
    assert r.pool.disabled[1].status_code == 429 and r.pool.disabled[2].status_code == 401
    (record,) = r.log.records
    assert [(a.account_id, a.status, a.verdict) for a in record.attempts] == [
        (1, 429, Verdict.DISABLE), (2, 401, Verdict.DISABLE), (3, 200, Verdict.OK)]
    assert record.account_id == 3 and record.status == 200 and record.error_class == ErrorClass.NONE
    assert (record.input_tokens, record.output_tokens) == (11, 3)


def test_retry_after_given_as_a_date_cools_the_account_down_until_then() -> None:
    r, prov = three_accounts({"sk-one": error_reply(429, "slow down", retry_after="Wed, 21 Oct 2099 07:28:00 GMT"),
                              "sk-two": json_reply(chat_answer("ok"))})
    run(lambda: dispatch(r.gw, exchange("openai_chat", chat_body(), prov)))
    assert r.pool.disabled[1].cooldown_until == dt.datetime(2099, 10, 21, 7, 28, tzinfo=dt.timezone.utc)


def test_a_server_error_and_an_overload_go_to_the_next_account_without_disabling_by_default() -> None:
    r, prov = three_accounts({"sk-one": error_reply(500, "upstream exploded", "server_error"),
                              "sk-two": error_reply(529, "Overloaded", "overloaded_error", anthropic=True),
                              "sk-three": json_reply(chat_answer("third"))})
    ex = exchange("openai_chat", chat_body(), prov)
    assert run(lambda: dispatch(r.gw, ex)).status == 200
    assert r.upstream.secrets == ["sk-one", "sk-two", "sk-three"] and not r.pool.disabled
    assert [(a.status, a.verdict, a.tier) for a in ex.record.attempts] == [
        (500, Verdict.RETRY, "upstream_unavailable"), (529, Verdict.RETRY, "upstream_unavailable"),
        (200, Verdict.OK, "")]


def test_when_every_account_gets_a_server_error_the_client_gets_the_last_one_not_no_accounts() -> None:
    r, prov = three_accounts({"sk-one": error_reply(503, "unavailable", "server_error"),
                              "sk-two": error_reply(500, "upstream exploded", "server_error"),
                              "sk-three": error_reply(529, "Overloaded", "overloaded_error", retry_after="7")})
    ex = exchange("openai_chat", chat_body(), prov)
    with pytest.raises(UpstreamFailed) as failed:
        run(lambda: dispatch(r.gw, ex))
    assert (failed.value.upstream_status, failed.value.message) == (529, "Overloaded")
    assert failed.value.headers == {"Retry-After": "7"}
    assert not r.pool.disabled and len(ex.record.attempts) == 3


def test_a_provider_rule_can_send_server_errors_back_to_the_client_untried_elsewhere() -> None:
    strict = [{"name": "fail_fast", "status": [500], "contains": [], "action": "return", "tier": "fail_fast"}]
    r, prov = three_accounts({"sk-one": error_reply(500, "upstream exploded", "server_error"),
                              "sk-two": json_reply(chat_answer("never asked"))}, provider(rules=strict))
    ex = exchange("openai_chat", chat_body(), prov)
    with pytest.raises(UpstreamFailed) as failed:
        run(lambda: dispatch(r.gw, ex))
    assert failed.value.upstream_status == 500
    assert r.upstream.secrets == ["sk-one"] and not r.pool.disabled
    assert [a.verdict for a in ex.record.attempts] == [Verdict.RETURN]


def test_a_disabled_account_is_scheduled_for_a_test_as_its_rule_says() -> None:
    r, prov = three_accounts({"sk-one": error_reply(429, "Rate limited", "rate_limit_error"),
                              "sk-two": error_reply(402, "pay up"),
                              "sk-three": error_reply(401, "Invalid key", "authentication_error")})
    with pytest.raises(NoAccounts):
        run(lambda: dispatch(r.gw, exchange("openai_chat", chat_body(), prov)))
    assert {pk: d.retest_after for pk, d in r.pool.disabled.items()} == {1: 600, 2: 21600, 3: 3600}


def test_insufficient_tokens_moves_on_without_disabling_and_estimated_cost_is_returned() -> None:
    r, prov = three_accounts({"sk-one": error_reply(403, "Insufficient tokens on this plan", "permission_error"),
                              "sk-two": error_reply(403, "The estimated cost exceeds your limit", "permission_error"),
                              "sk-three": json_reply(chat_answer("unused"))})
    ex = exchange("openai_chat", chat_body(), prov)
    with pytest.raises(UpstreamFailed) as failed:
        run(lambda: dispatch(r.gw, ex))
    assert failed.value.upstream_status == 403 and "estimated cost" in failed.value.message
    assert r.upstream.secrets == ["sk-one", "sk-two"] and not r.pool.disabled
    assert [a.verdict for a in ex.record.attempts] == [Verdict.RETRY, Verdict.RETURN]


def test_a_returned_error_reaches_a_client_of_the_same_protocol_as_sent_without_the_key() -> None:
    body = {"error": {"message": "bad thing for key sk-one", "type": "invalid_request_error",
                      "param": "temperature", "code": "out_of_range", "x_vendor": 1}}
    r, prov = three_accounts({"sk-one": json_reply(body, 400)})
    with pytest.raises(UpstreamFailed) as failed:
        run(lambda: dispatch(r.gw, exchange("openai_chat", chat_body(), prov)))
    assert failed.value.raw is not None
    returned = orjson.loads(failed.value.raw)
    assert returned["error"]["x_vendor"] == 1 and returned["error"]["code"] == "out_of_range"
    assert "sk-one" not in failed.value.raw.decode() and "sk-one" not in failed.value.message


def test_a_refused_connection_moves_on_without_blaming_the_account() -> None:
    r, prov = three_accounts({"sk-one": refused(), "sk-two": json_reply(chat_answer("second"))})
    ex = exchange("openai_chat", chat_body(), prov)
    assert run(lambda: dispatch(r.gw, ex)).status == 200
    assert not r.pool.disabled
    assert [(a.status, a.verdict) for a in ex.record.attempts] == [(None, Verdict.NETWORK), (200, Verdict.OK)]
    assert "Connection refused" in ex.record.attempts[0].error


def test_every_account_unreachable_is_upstream_unavailable() -> None:
    r, prov = three_accounts({s: refused() for s in ("sk-one", "sk-two", "sk-three")})
    ex = exchange("openai_chat", chat_body(), prov)
    with pytest.raises(UpstreamUnavailable):
        run(lambda: dispatch(r.gw, ex))
    assert [a.verdict for a in ex.record.attempts] == [Verdict.NETWORK] * 3 and not r.pool.disabled


def test_every_account_exhausted_is_no_accounts_and_each_is_disabled_once() -> None:
    r, prov = three_accounts({s: error_reply(402, "pay up") for s in ("sk-one", "sk-two", "sk-three")})
    with pytest.raises(NoAccounts):  # not the 402: the pool is what ran out, not the upstream

        run(lambda: dispatch(r.gw, exchange("openai_chat", chat_body(), prov)))
    assert sorted(r.pool.disabled) == [1, 2, 3] and r.upstream.secrets == ["sk-one", "sk-two", "sk-three"]


def test_an_empty_pool_is_no_accounts_and_an_unreachable_database_is_said_so() -> None:
    # (The views answer DatabaseUnavailable with 503 in the client's envelope: tests/gateway/test_edge.py.)
    prov = provider()
    with pytest.raises(NoAccounts):
        run(lambda: dispatch(rig(snapshot([prov])).gw, exchange("openai_chat", chat_body(), prov)))
    with pytest.raises(DatabaseUnavailable):
        run(lambda: dispatch(rig(snapshot([prov]), [account(1, "sk-one")], unavailable=True).gw,
                             exchange("openai_chat", chat_body(), prov)))


def test_no_more_accounts_are_tried_than_the_attempt_limit() -> None:
    prov = provider()
    accounts = [account(i, f"sk-{i}") for i in range(1, 6)]
    r = rig(snapshot([prov]), accounts, FakeUpstream(default=refused()), Options(max_attempts=2))
    with pytest.raises(UpstreamUnavailable):
        run(lambda: dispatch(r.gw, exchange("openai_chat", chat_body(), prov)))
    assert r.upstream.secrets == ["sk-1", "sk-2"]


def test_an_unreadable_json_answer_is_retried_on_the_next_account() -> None:
    r, prov = three_accounts({"sk-one": Reply(200, [b"{\"choices\": [tru"]),
                              "sk-two": json_reply(chat_answer("second"))})
    ex = exchange("openai_chat", chat_body(), prov)
    assert run(lambda: dispatch(r.gw, ex)).status == 200
    assert [a.verdict for a in ex.record.attempts] == [Verdict.MALFORMED, Verdict.OK] and not r.pool.disabled


# ----------------------------------------------------------------- streams


def test_an_error_inside_a_stream_before_content_is_retried_and_the_client_never_sees_it() -> None:
    rate_limited = chunk({"role": "assistant", "content": ""}, None,
                         error={"code": 429, "message": "Rate limit exceeded"})
    r, prov = three_accounts({"sk-one": sse_reply(rate_limited, "[DONE]"),
                              "sk-two": sse_reply(*chat_stream("Hel", "lo"))})
    ex = exchange("openai_chat", chat_body(stream=True), prov)

    async def work() -> bytes:
        return await body_of(await dispatch(r.gw, ex))

    raw = run(work)
    assert chat_text(raw) == "Hello" and b"Rate limit" not in raw
    assert raw.endswith(b"data: [DONE]\n\n")
    assert [a.verdict for a in ex.record.attempts] == [Verdict.DISABLE, Verdict.OK] and set(r.pool.disabled) == {1}


def test_a_connection_lost_before_content_is_retried_without_blaming() -> None:
    r, prov = three_accounts({"sk-one": sse_reply(chunk({"role": "assistant", "content": ""}), lost=True),
                              "sk-two": sse_reply(*chat_stream("fine"))})
    ex = exchange("openai_chat", chat_body(stream=True), prov)
    raw = run(lambda: stream_of(r, ex))
    assert chat_text(raw) == "fine"
    assert [a.verdict for a in ex.record.attempts] == [Verdict.NETWORK, Verdict.OK] and not r.pool.disabled


def test_a_connection_lost_after_content_ends_an_anthropic_clients_stream_in_its_protocol() -> None:
    stream = chat_stream("Once", " upon")[:3]  # role, two deltas, then the connection drops
    r, prov = three_accounts({"sk-one": sse_reply(*stream, lost=True), "sk-two": sse_reply(*chat_stream("no"))})
    ex = exchange("anthropic", anthropic_body(stream=True), prov)
    got = events(run(lambda: stream_of(r, ex)))

    names = [name for name, _ in got]
    assert names[0] == "message_start" and names[-2:] == ["error", "message_stop"]
    text = "".join(d["delta"]["text"] for name, d in got if name == "content_block_delta")
    assert text == "Once upon"
    assert r.upstream.secrets == ["sk-one"]  # content had gone out: no retry
    (record,) = r.log.records
    assert record.error_class == ErrorClass.UPSTREAM_DISCONNECTED and record.status == 200


def test_a_connection_lost_after_content_ends_a_passed_through_chat_stream_with_an_error_and_done() -> None:
    r, prov = three_accounts({"sk-one": sse_reply(*chat_stream("Once")[:2], lost=True)})
    ex = exchange("openai_chat", chat_body(stream=True), prov)
    got = events(run(lambda: stream_of(r, ex)))
    assert got[-1] == (None, "[DONE]")
    assert "error" in got[-2][1] and "".join(d["choices"][0]["delta"].get("content") or "" for _, d in got[:-2]) == "Once"
    assert r.log.records[0].error_class == ErrorClass.UPSTREAM_DISCONNECTED



@pytest.mark.parametrize("size", [1, 7, 64, 100_000])
def test_a_passed_through_stream_keeps_the_upstreams_events_however_its_bytes_were_cut(size: int) -> None:
    upstream = [chunk({"role": "assistant", "content": "", "x_vendor_field": [1, 2]}, None, provider="p-9"),
                chunk({"content": "héllo ✓"}, None, logprobs_extra={"k": 0.5}),
                chunk({}, "stop"), "[DONE]"]
    r, prov = three_accounts({"sk-one": sse_reply(*upstream, size=size)})
    ex = exchange("openai_chat", chat_body(stream=True), prov)
    got = events(run(lambda: stream_of(r, ex)))
    assert [d for _, d in got] == upstream


def test_a_passed_through_json_answer_is_returned_byte_for_byte() -> None:
    raw = b'{"id":"x-1", "object":"chat.completion","model":"m-1",  "choices":[{"index":0,"message":' \
          b'{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"system_fingerprint":"fp_1",' \
          b'"usage":{"prompt_tokens":4,"completion_tokens":1,"total_tokens":5},"vendor":{"n":[1.50]}}'
    r, prov = three_accounts({"sk-one": Reply(200, [raw[:9], raw[9:]], {"content-type": "application/json"})})
    response = run(lambda: dispatch(r.gw, exchange("openai_chat", chat_body(), prov)))
    assert run(lambda: body_of(response)) == raw
    assert (r.log.records[0].input_tokens, r.log.records[0].output_tokens) == (4, 1)


def test_a_translated_stream_logs_its_usage_finish_and_time_to_first_byte() -> None:
    r, prov = three_accounts({"sk-one": sse_reply(*chat_stream("a", "b", "c"), size=5)})
    ex = exchange("anthropic", anthropic_body(stream=True), prov)
    got = events(run(lambda: stream_of(r, ex)))
    assert [n for n, _ in got][-1] == "message_stop" and "error" not in [n for n, _ in got]
    (record,) = r.log.records
    assert (record.status, record.error_class, record.input_tokens, record.output_tokens) == (200, "", 7, 3)
    assert record.finish_reason == "stop" and record.ttfb_ms is not None and record.stream
