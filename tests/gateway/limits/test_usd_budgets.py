"""USD budgets per client key over rolling windows: reserved before dispatch, charged the real cost after,
refused with a message saying when the oldest spending leaves the window."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from accounts.budgetwindows import DAY, KEY, Subject
from gateway.errors import RateLimited
from gateway.limits import Budget, Limits, request_estimate
from gateway.limits.budgets import USD
from gateway.limits.standing import DEFAULT_HELP
from gateway.log.writer import LogRecord
from gateway.state import KeyInfo
from translation import registry

# $1000 per million tokens either way: one token is a tenth of a cent, 1000 micro-dollars.
PRICES = {"m": {"input": 1000, "output": 1000}}
UTC = dt.timezone.utc
WHOEVER = Subject(KEY, 9, "usd-unit")


def key(key_id: int = 9, **usd: int) -> KeyInfo:
    """``usd``: period name → limit in micro-dollars."""

    return KeyInfo(id=key_id, name="usd-unit", allowed_models=(), rate_limit_per_minute=None,
                   daily_token_limit=None, usd_budgets=tuple(usd.items()))


def fixed(micros: int) -> Callable[[Budget], int]:
    return lambda budget: micros


def answered(tokens_in: int, tokens_out: int, status: int = 200, model: str = "m") -> LogRecord:
    return LogRecord(request_id="r", client_protocol="openai_chat", status=status, model_sent=model,
                     input_tokens=tokens_in, output_tokens=tokens_out)


async def nothing_logged(budget: Budget, start: int) -> dict[int, int]:
    return {}


async def settled() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


class Clock:
    def __init__(self, when: dt.datetime) -> None:
        self.now = when.timestamp()

    def __call__(self) -> float:
        return self.now

    def set(self, when: dt.datetime) -> None:
        self.now = when.timestamp()


def at(hour: int, minute: int, second: int = 0, day: int = 25) -> dt.datetime:
    return dt.datetime(2026, 11, day, hour, minute, second, tzinfo=UTC)


def limits_at(when: dt.datetime | Clock | None = None) -> Limits:
    clock = Clock(when) if isinstance(when, dt.datetime) else when
    limits = Limits(clock=clock) if clock is not None else Limits()
    limits.usage.since = nothing_logged  # type: ignore[method-assign]
    return limits


async def spend(limits: Limits, k: KeyInfo, tokens: int, request_id: str = "r") -> None:
    """An admitted request that cost ``tokens`` tenths of a cent."""

    hold = await limits.admit(k, request_id, fixed(0), PRICES)
    hold.settle(answered(tokens, 0))
    await settled()


async def refusal(limits: Limits, k: KeyInfo) -> RateLimited:
    with pytest.raises(RateLimited) as refused:
        await limits.admit(k, "refused", fixed(0), PRICES)
    return refused.value


def test_a_usd_budget_reserves_the_estimate_and_is_charged_the_real_cost() -> None:
    async def go() -> None:
        limits = limits_at(at(10, 41, 20))
        k = key(day=10_000)  # $0.01
        a = await limits.admit(k, "a", fixed(6000), PRICES)
        b = await limits.admit(k, "b", fixed(6000), PRICES)  # 6000 reserved < 10000: the one that crosses is served
        with pytest.raises(RateLimited) as taken:
            await limits.admit(k, "c", fixed(6000), PRICES)
        assert taken.value.message.startswith("The 24-hour USD budget of $0.01 for this key is taken")
        assert "$0.00 used and $0.012 reserved by requests in flight" in taken.value.message
        assert taken.value.headers["Retry-After"] == "1"
        a.settle(answered(3, 2))  # 5 tokens: $0.005
        b.settle(None)  # failed before any answer: nothing spent
        await settled()
        c = await limits.admit(k, "c", fixed(6000), PRICES)
        c.settle(answered(4, 2))  # $0.006, so $0.011 of $0.01 spent
        await settled()
        with pytest.raises(RateLimited) as spent:
            await limits.admit(k, "d", fixed(1), PRICES)
        # Spent in the half-hour slice from 10:30: it leaves the window 24 hours after the slice's end.
        assert spent.value.message == ("This key's 24-hour USD budget of $0.01 is used up ($0.011 in the last "
                                       f"24 hours); it frees Nov 26 at 11:00 UTC; {DEFAULT_HELP}")
        assert spent.value.headers["Retry-After"] == str(int((at(11, 0, day=26) - at(10, 41, 20)).total_seconds()))

    asyncio.run(go())


def test_failed_requests_and_unpriced_models_are_not_charged() -> None:
    async def go() -> None:
        limits = limits_at()
        k = key(day=5000)
        for i, record in enumerate([answered(100, 100, status=502), answered(100, 100, model="unpriced"),
                                    answered(100, 100, status=429)]):
            hold = await limits.admit(k, f"r{i}", fixed(0), PRICES)
            hold.settle(record)
            await settled()
        hold = await limits.admit(k, "last", fixed(0), PRICES)  # nothing was spent: still admitted
        hold.settle(answered(5, 0))  # $0.005 exactly: the budget is spent
        await settled()
        with pytest.raises(RateLimited, match=r"24-hour USD budget of \$0.005 is used up"):
            await limits.admit(k, "over", fixed(0), PRICES)

    asyncio.run(go())


@pytest.mark.parametrize(("window", "adjective", "phrase", "frees"), [
    # Spent at 07:31:10 in the window's slice: 5 minutes from 07:30, 30 from 07:30, 3 hours from 06:00 (a multiple
    # of 3 hours since the epoch), 12 hours from 00:00; freed when that slice has wholly left the window.
    ("5h", "5-hour", "the last 5 hours", at(12, 35)),
    ("day", "24-hour", "the last 24 hours", at(8, 0, day=26)),
    ("week", "7-day", "the last 7 days", dt.datetime(2026, 12, 2, 9, 0, tzinfo=UTC)),
    ("month", "30-day", "the last 30 days", dt.datetime(2026, 12, 25, 12, 0, tzinfo=UTC)),
])
def test_each_window_names_itself_and_when_it_frees(window: str, adjective: str, phrase: str,
                                                     frees: dt.datetime) -> None:
    now = at(7, 31, 10)

    async def go() -> None:
        limits = limits_at(now)
        k = key(**{window: 2_500_000})  # $2.50
        await spend(limits, k, 2500)  # $2.50
        refused = await refusal(limits, k)
        assert refused.message == (f"This key's {adjective} USD budget of $2.50 is used up ($2.50 in {phrase}); "
                                   f"it frees {frees:%b %-d at %H:%M} UTC; {DEFAULT_HELP}")
        assert int(refused.headers["Retry-After"]) == int((frees - now).total_seconds())

    asyncio.run(go())


def test_spend_that_ages_out_of_the_window_frees_the_budget() -> None:
    async def go() -> None:
        clock = Clock(at(7, 31, 10))
        limits, k = limits_at(clock), key(**{"5h": 2_500_000})
        await spend(limits, k, 2500)
        for later in (at(12, 31, 10), at(12, 34, 59)):  # 5 hours on, its slice still reaches into the window
            clock.set(later)
            assert "it frees Nov 25 at 12:35 UTC" in (await refusal(limits, k)).message
        clock.set(at(12, 35))
        await spend(limits, k, 2000, "after")  # the $2.50 left the window: admitted, and $2.00 spent since
        clock.set(at(12, 36))
        await spend(limits, k, 500, "more")  # $2.00 of $2.50: admitted
        assert "($2.50 in the last 5 hours); it frees Nov 25 at 17:40 UTC" in (await refusal(limits, k)).message

    asyncio.run(go())


@pytest.mark.parametrize(("oldest", "newest", "frees"), [
    (3000, 2500, "12:35"),  # once the oldest slice leaves, $2.50 remain: under the limit
    (200, 5000, "14:05"),  # the oldest slice's $0.20 is not enough: $5.00 remain until 09:00's slice leaves too
])
def test_the_budget_frees_when_enough_of_the_oldest_slices_have_left(oldest: int, newest: int, frees: str) -> None:
    async def go() -> None:
        clock = Clock(at(7, 31, 10))
        limits, k = limits_at(clock), key(**{"5h": 5_000_000})  # $5.00
        await spend(limits, k, oldest, "old")
        clock.set(at(9, 2))
        await spend(limits, k, newest, "new")
        clock.set(at(10, 0))
        refused = await refusal(limits, k)
        spent = f"${(oldest + newest) / 1000:.2f}"
        assert refused.message == (f"This key's 5-hour USD budget of $5.00 is used up ({spent} in the last 5 "
                                   f"hours); it frees Nov 25 at {frees} UTC; {DEFAULT_HELP}")
        hour, minute = (int(x) for x in frees.split(":"))
        assert refused.headers["Retry-After"] == str(int((at(hour, minute) - at(10, 0)).total_seconds()))

    asyncio.run(go())


def test_a_refusal_alerts_once_per_budget_and_window_length() -> None:
    async def go() -> None:
        clock = Clock(at(7, 31, 10))
        limits, k = limits_at(clock), key(**{"5h": 1000})
        told: list[str] = []
        limits.budget_refused = lambda key, budget, event: told.append(event)
        await spend(limits, k, 1)
        await refusal(limits, k)
        clock.set(at(8, 30))
        await refusal(limits, k)  # the same 5-hour block since the epoch (07:00 to 12:00 on that day)
        clock.set(at(12, 0))  # the next block: still refused (the spend leaves at 12:35), alerted again
        await refusal(limits, k)
        assert len(told) == 3 and told[0] == told[1] != told[2]
        assert told[0].startswith("usd:5h:9:usd-unit:")

    asyncio.run(go())


def test_every_budget_of_a_key_is_kept_and_the_tightest_refuses() -> None:
    async def go() -> None:
        limits = limits_at()
        k = key(day=100_000, month=3000)  # $0.10 a day but $0.003 a month
        hold = await limits.admit(k, "a", fixed(0), PRICES)
        hold.settle(answered(3, 0))
        await settled()
        with pytest.raises(RateLimited, match="30-day USD budget of \\$0.003"):
            await limits.admit(k, "b", fixed(0), PRICES)

    asyncio.run(go())


def test_the_reservation_is_the_token_estimate_priced_by_the_route() -> None:
    proto = registry.get("anthropic")
    body: dict[str, Any] = {"model": "m", "max_tokens": 300, "messages": [{"role": "user", "content": "hi " * 200}]}
    request = proto.parse_request(body)
    estimate = request_estimate("anthropic", body, request, 1000, 4096, PRICES, "m")
    tokens = Budget("tokens", 1, DAY, len, len, WHOEVER)  # the estimate depends on the unit only
    usd = Budget(USD, 1, DAY, len, len, WHOEVER)
    # Both prices are 1000 micro-dollars a token: the USD reservation is the token reservation in tenths of a cent.
    assert estimate(tokens) > 300
    assert estimate(usd) == estimate(tokens) * 1000
    unpriced = request_estimate("anthropic", body, request, 1000, 4096, PRICES, "other")
    assert unpriced(usd) == 0


@pytest.mark.django_db(transaction=True)
def test_what_the_request_log_shows_spent_in_the_window_counts_against_the_budget() -> None:
    from accounts.models import ApiKey, RequestLog
    from gateway.limits.budgets import tokens_logged, usd_logged

    row = ApiKey.objects.create(name="usd-logged", key_hash="h" * 64, usd_budget_day=Decimal("0.02"))
    now = dt.datetime.now(UTC)
    for ago, cost in [(dt.timedelta(), "0.01"), (dt.timedelta(hours=20), "0.005"), (dt.timedelta(hours=49), "0.9")]:
        RequestLog.objects.create(client_key=row, status=200, client_protocol="openai_chat", cost=Decimal(cost),
                                  input_tokens=3, output_tokens=4, created_at=now - ago)  # the last: out of it

    # Per slice: the reader groups what the database summed per minute or hour into the window's slices.
    since = now - dt.timedelta(hours=25)
    sliced = {int((now - ago).timestamp()) // 1800 * 1800 for ago in (dt.timedelta(), dt.timedelta(hours=20))}
    own = Subject(KEY, row.pk, row.name)
    assert usd_logged(own, since, 1800) == dict(zip(sorted(sliced), [Decimal("0.005"), Decimal("0.01")]))
    assert tokens_logged(own, since, 10_800) == {
        int((now - ago).timestamp()) // 10_800 * 10_800: 7 for ago in (dt.timedelta(), dt.timedelta(hours=20))}

    from gateway.state import key_info

    info = key_info(row)
    assert info.usd_budgets == (("day", 20_000),)

    async def go() -> None:
        limits = Limits()
        hold = await limits.admit(info, "a", fixed(1000), PRICES)  # $0.015 of $0.02 spent: admitted
        hold.settle(answered(5, 0))  # $0.005 more
        await settled()
        with pytest.raises(RateLimited, match=r"24-hour USD budget of \$0.02 is used up \(\$0.02 in"):
            await limits.admit(info, "b", fixed(1000), PRICES)

    asyncio.run(go())
