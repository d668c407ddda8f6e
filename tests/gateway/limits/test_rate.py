"""Requests per minute per client key: fixed one-minute windows, refused with 429 and the seconds
until the window ends as Retry-After."""

from __future__ import annotations

import asyncio

import orjson

from gateway.edge.edge import Edge
from gateway.errors import RateLimited
from gateway.limits import Limits
from gateway.options import Options
from gateway.state import KeyInfo
from tests.gateway.fakes import (
    Answer,
    FakeUpstream,
    account,
    asgi_call,
    bearer,
    chat_answer,
    chat_body,
    client_key,
    json_reply,
    provider,
    rig,
    snapshot,
)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def hits(limits: Limits, key: KeyInfo, n: int) -> list[str | None]:
    """For each of ``n`` requests: None when let through, else its Retry-After."""

    async def work() -> list[str | None]:
        out: list[str | None] = []
        for _ in range(n):
            try:
                await limits.check_rate(key)
                out.append(None)
            except RateLimited as refused:
                assert refused.status == 429
                out.append(refused.headers["Retry-After"])
        return out

    return asyncio.run(work())


def test_the_request_over_the_limit_is_refused_until_the_window_ends() -> None:
    clock = Clock(6000.0)  # the start of a minute
    limits, key = Limits(clock=clock), client_key(rate_limit_per_minute=3)
    assert hits(limits, key, 4) == [None, None, None, "60"]
    clock.now = 6029.5
    assert hits(limits, key, 1) == ["31"]  # whole seconds, rounded up
    clock.now = 6059.99
    assert hits(limits, key, 1) == ["1"]
    clock.now = 6060.0  # a new minute
    assert hits(limits, key, 4) == [None, None, None, "60"]


def test_keys_are_counted_apart_and_a_key_without_a_limit_is_never_refused() -> None:
    limits = Limits(clock=Clock(6000.0))
    one, two = client_key(rate_limit_per_minute=1), client_key(rate_limit_per_minute=1)
    assert hits(limits, one, 2) == [None, "60"]
    assert hits(limits, two, 1) == [None]
    assert hits(limits, client_key(), 500) == [None] * 500


def test_with_redis_unreachable_requests_are_still_counted_in_the_process() -> None:
    limits = Limits("redis://127.0.0.1:1/0", clock=Clock(6000.0))  # nothing listens on port 1
    assert hits(limits, client_key(rate_limit_per_minute=1), 2) == [None, "60"]


def test_a_limited_key_gets_429_with_retry_after_in_its_envelope_and_the_upstream_is_spared() -> None:
    key = client_key("gw-limited", rate_limit_per_minute=1)
    r = rig(snapshot([provider(served_models=["m-1"])], {"gw-limited": key}), [account(1, "sk-one")],
            FakeUpstream({"sk-one": json_reply(chat_answer("hi"))}), Options(),
            Limits(clock=Clock(6010.0)))

    app = Edge(r.gw, pages=None, sockets=None)

    async def work() -> list[Answer]:
        return [await asgi_call(app, "POST", "/v1/chat/completions", orjson.dumps(chat_body()), bearer("gw-limited"))
                for _ in range(2)]

    first, second = asyncio.run(work())
    assert first.status == 200
    assert second.status == 429 and second.headers["retry-after"] == "50"
    assert second.json()["error"]["type"] == "rate_limit_error"
    assert len(r.upstream.calls) == 1
