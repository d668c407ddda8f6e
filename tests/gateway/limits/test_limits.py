"""The app's limits object: admission, settlement on every ending, fallback to this process."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from gateway.errors import RateLimited
from gateway.limits import Budget, Limits
from gateway.log.writer import LogRecord
from gateway.state import KeyInfo
from tests.servers import free_port


def key(**limits: int) -> KeyInfo:
    return KeyInfo(id=7, name="limits-unit", allowed_models=(), rate_limit_per_minute=None,
                   daily_token_limit=limits.get("daily"), max_concurrent_requests=limits.get("concurrent"))


def fixed(amount: int) -> Callable[[Budget], int]:
    return lambda budget: amount


def spent(tokens: int) -> LogRecord:
    return LogRecord(request_id="r", client_protocol="anthropic", input_tokens=tokens, output_tokens=0)


async def settled() -> None:
    """Let the give-back tasks run."""

    for _ in range(3):
        await asyncio.sleep(0)


def test_a_key_without_limits_is_admitted_without_asking_anything() -> None:
    async def go() -> None:
        limits = Limits()
        hold = await limits.admit(key(), "r1", lambda budget: pytest.fail("no budget, no estimate"))
        assert hold.leases == []
        hold.settle()

    asyncio.run(go())


def test_the_concurrency_cap_and_its_slots_coming_back() -> None:
    async def go() -> None:
        limits = Limits()
        k = key(concurrent=2)
        first = await limits.admit(k, "r1", fixed(0))
        await limits.admit(k, "r2", fixed(0))
        with pytest.raises(RateLimited) as refused:
            await limits.admit(k, "r3", fixed(0))
        assert "limited to 2 concurrent requests" in refused.value.message
        assert refused.value.headers["Retry-After"] == "1"
        first.settle()
        first.settle()  # twice is once
        await settled()
        await limits.admit(k, "r3", fixed(0))
        with pytest.raises(RateLimited):
            await limits.admit(k, "r4", fixed(0))

    asyncio.run(go())


def test_a_hold_settled_from_another_thread_goes_back_on_its_loop() -> None:
    async def go() -> None:
        limits = Limits()
        k = key(concurrent=1)
        hold = await limits.admit(k, "r1", fixed(0))
        thread = threading.Thread(target=hold.settle)  # the garbage collector's thread, say
        thread.start()
        thread.join()
        await settled()
        await limits.admit(k, "r2", fixed(0))

    asyncio.run(go())


@pytest.mark.django_db(transaction=True)
def test_a_token_budget_reserves_the_estimate_and_is_charged_what_was_spent() -> None:
    async def go() -> None:
        limits = Limits()
        k = key(daily=100)
        seen: list[Budget] = []

        def estimate(budget: Budget) -> int:
            seen.append(budget)
            return 60

        a = await limits.admit(k, "a", estimate)
        b = await limits.admit(k, "b", estimate)  # 60 reserved < 100: the one that crosses is served
        assert [s.unit for s in seen] == ["tokens", "tokens"] and seen[0].limit == 100
        with pytest.raises(RateLimited) as taken:
            await limits.admit(k, "c", estimate)
        assert "0 used and 120 reserved" in taken.value.message
        a.settle(spent(30))
        b.settle(None)  # failed before any answer: nothing spent
        await settled()
        c = await limits.admit(k, "c", estimate)
        c.settle(spent(75))
        await settled()
        with pytest.raises(RateLimited) as used:
            await limits.admit(k, "d", estimate)
        assert "used its 100 tokens in the last 24 hours" in used.value.message
        assert int(used.value.headers["Retry-After"]) > 1

    asyncio.run(go())


def test_a_refused_budget_gives_the_slot_back() -> None:
    async def go() -> None:
        limits = Limits()
        k = key(concurrent=1, daily=10)
        limits.usage.since = _nothing_logged  # type: ignore[method-assign]
        hold = await limits.admit(k, "a", fixed(50))
        hold.settle(spent(20))
        await settled()
        with pytest.raises(RateLimited):
            await limits.admit(k, "b", fixed(50))  # over budget ...
        await settled()
        await limits.admit(key(concurrent=1), "c", fixed(0))  # ... and the slot it took was given back

    asyncio.run(go())


async def _nothing_logged(budget: Budget, start: int) -> dict[int, int]:
    return {}


def test_with_redis_unreachable_slots_are_kept_in_this_process() -> None:
    async def go() -> None:
        limits = Limits(f"redis://127.0.0.1:{free_port()}/0")
        k = key(concurrent=1)
        hold = await limits.admit(k, "r1", fixed(0))
        assert hold.leases[0].store is limits.local
        with pytest.raises(RateLimited):
            await limits.admit(k, "r2", fixed(0))
        assert limits.shared is not None and not limits.shared.breaker.closed
        hold.settle()
        await settled()
        await limits.admit(k, "r3", fixed(0))
        await limits.aclose()

    asyncio.run(go())
