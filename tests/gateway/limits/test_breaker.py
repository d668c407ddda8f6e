"""The breaker around the limits' Redis: one failure opens it, one trial per period, growing periods."""

from __future__ import annotations

import asyncio
import logging

import pytest

from gateway.limits.breaker import Breaker
from gateway.limits.store import RedisStore, SharedUnavailable, _Client
from tests.servers import free_port


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_failure_opens_it_and_one_trial_per_period_follows(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    breaker = Breaker("redis", first=5, most=30, clock=clock)
    caplog.set_level(logging.WARNING, "gateway.limits.breaker")
    assert breaker.allows() and breaker.allows()
    breaker.failed("TimeoutError")
    assert "breaker is open" in caplog.text and "5 s" in caplog.text
    assert not breaker.allows()
    breaker.failed("TimeoutError")  # a call that was already out when it opened: the period stands
    clock.now += 4.9
    assert not breaker.allows()
    clock.now += 0.1
    assert breaker.allows()  # the trial
    assert not breaker.allows()  # only one
    breaker.failed("TimeoutError")
    assert "10 s" in caplog.text
    for period in (10, 20, 30, 30):
        clock.now += period - 0.1
        assert not breaker.allows()
        clock.now += 0.1
        assert breaker.allows()
        breaker.failed("ConnectionError")
    clock.now += 30
    assert breaker.allows()
    breaker.succeeded()
    assert breaker.closed and "breaker is closed" in caplog.text
    assert breaker.allows() and breaker.allows()
    breaker.failed("TimeoutError")  # the next outage starts again from the first period
    clock.now += 5
    assert breaker.allows()


def test_a_cancelled_trial_lets_the_next_caller_try() -> None:
    clock = Clock()
    breaker = Breaker("redis", clock=clock)
    breaker.failed("TimeoutError")
    clock.now += 5
    assert breaker.allows()
    breaker.abandoned()
    assert breaker.allows()


def test_an_unreachable_redis_is_asked_once_per_period() -> None:
    clock = Clock()
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0", Breaker("redis", clock=clock))
    asked = 0
    real = store._client

    def counting() -> _Client:
        nonlocal asked
        asked += 1
        return real()

    store._client = counting  # type: ignore[method-assign]

    async def hits() -> int:
        failed = 0
        for _ in range(20):
            with pytest.raises(SharedUnavailable):
                await store.hit("k", 60)
            failed += 1
        clock.now += 5
        with pytest.raises(SharedUnavailable):
            await store.hit("k", 60)
        await store.aclose()
        return failed

    assert asyncio.run(hits()) == 20
    assert asked == 2  # the first call and the trial after the period, not 21
