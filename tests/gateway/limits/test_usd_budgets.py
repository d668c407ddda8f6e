"""USD budgets per client key: reserved before dispatch, charged the real cost after, refused with a message."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from gateway.errors import RateLimited
from gateway.limits import Budget, Limits, request_estimate
from gateway.limits.budgets import DAY, USD
from gateway.reqlog import LogRecord
from gateway.state import KeyInfo
from translation import registry

# $1000 per million tokens either way: one token is a tenth of a cent, 1000 micro-dollars.
PRICES = {"m": {"input": 1000, "output": 1000}}
UTC = dt.timezone.utc


def key(key_id: int = 9, **usd: int) -> KeyInfo:
    """``usd``: period name → limit in micro-dollars."""

    return KeyInfo(id=key_id, name="usd-unit", allowed_models=(), rate_limit_per_minute=None,
                   daily_token_limit=None, usd_budgets=tuple(usd.items()))


def fixed(micros: int) -> Callable[[Budget], int]:
    return lambda budget: micros


def answered(tokens_in: int, tokens_out: int, status: int = 200, model: str = "m") -> LogRecord:
    return LogRecord(request_id="r", client_protocol="openai_chat", status=status, model_sent=model,
                     input_tokens=tokens_in, output_tokens=tokens_out)


async def nothing_logged(budget: Budget, key_id: int, start: object) -> int:
    return 0


async def settled() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def limits_at(when: dt.datetime | None = None) -> Limits:
    limits = Limits(clock=when.timestamp) if when is not None else Limits()
    limits.usage.since = nothing_logged  # type: ignore[method-assign]
    return limits


def test_a_usd_budget_reserves_the_estimate_and_is_charged_the_real_cost() -> None:
    async def go() -> None:
        limits = limits_at()
        k = key(day=10_000)  # $0.01
        a = await limits.admit(k, "a", fixed(6000), PRICES)
        b = await limits.admit(k, "b", fixed(6000), PRICES)  # 6000 reserved < 10000: the one that crosses is served
        with pytest.raises(RateLimited) as taken:
            await limits.admit(k, "c", fixed(6000), PRICES)
        assert taken.value.message.startswith("The daily USD budget of $0.01 for this key is taken")
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
        message = spent.value.message
        assert message.startswith("The daily USD budget of $0.01 for this key is spent ($0.011 for today (UTC))")
        midnight = (dt.datetime.now(UTC) + dt.timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        assert message.endswith(f"it frees at {midnight:%Y-%m-%d} 00:00 UTC")
        retry_after = int(spent.value.headers["Retry-After"])
        assert abs(dt.datetime.now(UTC).timestamp() + retry_after - midnight.timestamp()) < 5

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
        with pytest.raises(RateLimited, match=r"daily USD budget of \$0.005 for this key is spent"):
            await limits.admit(k, "over", fixed(0), PRICES)

    asyncio.run(go())


@pytest.mark.parametrize(("period", "adjective", "frees"), [
    # 5-hour blocks since the epoch: 20,782 days are 498,768 hours (3 past a block), so blocks start 02:00, 07:00, 12:00
    ("5h", "5-hour", dt.datetime(2026, 11, 25, 12, 0, tzinfo=UTC)),
    ("week", "weekly", dt.datetime(2026, 11, 30, tzinfo=UTC)),  # the Monday after
    ("month", "monthly", dt.datetime(2026, 12, 1, tzinfo=UTC)),
])
def test_each_period_names_itself_and_when_it_frees(period: str, adjective: str, frees: dt.datetime) -> None:
    now = dt.datetime(2026, 11, 25, 7, 30, tzinfo=UTC)  # a Wednesday

    async def go() -> None:
        limits = limits_at(now)
        k = key(**{period: 2_500_000})  # $2.50
        hold = await limits.admit(k, "a", fixed(1), PRICES)
        hold.settle(answered(2500, 0))  # $2.50
        await settled()
        with pytest.raises(RateLimited) as refused:
            await limits.admit(k, "b", fixed(1), PRICES)
        assert refused.value.message.startswith(f"The {adjective} USD budget of $2.50 for this key is spent")
        assert f"it frees at {frees:%Y-%m-%d %H:%M} UTC" in refused.value.message
        assert int(refused.value.headers["Retry-After"]) == int((frees - now).total_seconds())

    asyncio.run(go())


def test_every_budget_of_a_key_is_kept_and_the_tightest_refuses() -> None:
    async def go() -> None:
        limits = limits_at()
        k = key(day=100_000, month=3000)  # $0.10 a day but $0.003 a month
        hold = await limits.admit(k, "a", fixed(0), PRICES)
        hold.settle(answered(3, 0))
        await settled()
        with pytest.raises(RateLimited, match="monthly USD budget of \\$0.003"):
            await limits.admit(k, "b", fixed(0), PRICES)

    asyncio.run(go())


def test_the_reservation_is_the_token_estimate_priced_by_the_route() -> None:
    proto = registry.get("anthropic")
    body: dict[str, Any] = {"model": "m", "max_tokens": 300, "messages": [{"role": "user", "content": "hi " * 200}]}
    request = proto.parse_request(body)
    estimate = request_estimate("anthropic", body, request, 1000, 4096, PRICES, "m")
    tokens = Budget("tokens", 1, DAY, len, len)  # the estimate depends on the unit only
    usd = Budget(USD, 1, DAY, len, len)
    # Both prices are 1000 micro-dollars a token: the USD reservation is the token reservation in tenths of a cent.
    assert estimate(tokens) > 300
    assert estimate(usd) == estimate(tokens) * 1000
    unpriced = request_estimate("anthropic", body, request, 1000, 4096, PRICES, "other")
    assert unpriced(usd) == 0


@pytest.mark.django_db(transaction=True)
def test_what_the_request_log_shows_spent_today_counts_against_the_budget() -> None:
    from accounts.models import ApiKey, RequestLog

    row = ApiKey.objects.create(name="usd-logged", key_hash="h" * 64, usd_budget_day=Decimal("0.02"))
    RequestLog.objects.create(client_key=row, status=200, client_protocol="openai_chat", cost=Decimal("0.015"))
    RequestLog.objects.create(client_key=row, status=200, client_protocol="openai_chat", cost=Decimal("0.9"),
                              created_at=dt.datetime.now(UTC) - dt.timedelta(days=2))  # another day

    from gateway.state import key_info

    info = key_info(row)
    assert info.usd_budgets == (("day", 20_000),)

    async def go() -> None:
        limits = Limits()
        hold = await limits.admit(info, "a", fixed(1000), PRICES)  # $0.015 of $0.02 spent: admitted
        hold.settle(answered(5, 0))  # $0.005 more
        await settled()
        with pytest.raises(RateLimited, match=r"daily USD budget of \$0.02 for this key is spent \(\$0.02 for"):
            await limits.admit(info, "b", fixed(1000), PRICES)

    asyncio.run(go())
