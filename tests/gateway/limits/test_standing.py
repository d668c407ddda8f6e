"""A caller's standing against its USD caps, in Claude Code's words: the headers of each answer, the
billing refusal at the cap, and /api/oauth/usage, all naming the same reset second."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt

import pytest

from accounts.budgetwindows import DAY, MONTH, WEEK
from gateway.errors import SpendCapReached, headers_of, render, status_of
from gateway.limits.standing import answer_headers, usage_document
from gateway.state import TeamInfo
from tests.gateway.limits.test_usd_budgets import PRICES, Clock, at, fixed, key, limits_at, spend

H = "anthropic-ratelimit-unified-"


def test_no_cap_no_headers_and_a_spend_summary() -> None:
    async def go() -> None:
        limits = limits_at(at(10, 0))
        hold = await limits.admit(key(), "r", fixed(0), PRICES)
        assert hold.standings == [] and answer_headers(hold.standings) == {}
        assert await limits.standings(key()) == []

    asyncio.run(go())
    doc = usage_document([], {"month": 2714, "day": 1240, "week": 2000})
    assert doc == {"extra_usage": {"is_enabled": True, "monthly_limit": None, "used_credits": 2714, "utilization": None,
                                   "currency": "USD", "daily": {"limit": None, "used_credits": 1240, "utilization": None},
                                   "weekly": {"limit": None, "used_credits": 2000, "utilization": None}},
                   "limits": []}


def test_the_headers_pass_the_thresholds_and_reset_when_the_oldest_spending_leaves() -> None:
    async def go() -> None:
        clock = Clock(at(10, 5))
        limits, k = limits_at(clock), key(day=10_000)  # $0.01
        first = await limits.admit(k, "a", fixed(0), PRICES)
        # Nothing spent: spending made now would leave the window at the end of this slice, a day on.
        empty_reset = DAY.out_at(DAY.slice_of(clock.now))
        assert answer_headers(first.standings) == {
            H + "status": "allowed", H + "reset": str(empty_reset), H + "overage-reset": str(empty_reset),
            H + "overage-utilization": "0", H + "representative-claim": "overage", H + "overage-status": "allowed"}
        first.settle()
        await spend(limits, k, 7)  # $0.007 at 10:05, in the slice from 10:00
        clock.set(at(11, 40))
        await spend(limits, k, 1)  # $0.001 in the slice from 11:30
        hold = await limits.admit(k, "b", fixed(0), PRICES)
        headers = answer_headers(hold.standings)
        # 80 %: past 0.75; the reset is when 10:00's slice leaves (10:30 tomorrow), the first fall.
        reset = str(int(at(10, 30, day=26).timestamp()))
        assert headers[H + "status"] == headers[H + "overage-status"] == "allowed_warning"
        assert headers[H + "overage-utilization"] == "0.8"
        assert headers[H + "overage-surpassed-threshold"] == "0.75"
        assert headers[H + "reset"] == headers[H + "overage-reset"] == reset
        # /api/oauth/usage, read now, names the same second and whole percents and cents.
        doc = usage_document(await limits.standings(k))
        assert doc["extra_usage"] == {"is_enabled": True, "monthly_limit": 1, "used_credits": 0, "utilization": 80,
                                      "currency": "USD"}
        assert doc["limits"] == [{"kind": "spend", "group": "daily", "percent": 80,
                                  "resets_at": "2026-11-26T10:30:00.000Z", "severity": "warning", "is_active": True}]
        hold.settle()
        await spend(limits, k, 1)  # 90 %
        clock.set(at(11, 50))
        await spend(limits, k, 1)  # 100 %, the request that crosses is served...
        headers = answer_headers(limits_standings := await limits.standings(k))
        assert limits_standings[0].exceeded  # ...and the next one is refused
        assert headers[H + "overage-utilization"] == "1"

    asyncio.run(go())


def test_utilization_stays_under_one_while_allowed_and_past_95_is_the_second_threshold() -> None:
    async def go() -> None:
        limits, k = limits_at(at(10, 0)), key(day=100_000)  # $0.10
        await spend(limits, k, 99)  # $0.099 of $0.10
        hold = await limits.admit(k, "a", fixed(0), PRICES)
        headers = answer_headers(hold.standings)
        assert headers[H + "overage-utilization"] == "0.99"  # 0.99, never rounded up to 1 while allowed
        assert headers[H + "overage-surpassed-threshold"] == "0.95"
        assert usage_document(hold.standings)["limits"][0]["severity"] == "critical"

    asyncio.run(go())


def test_at_the_cap_a_billing_error_before_any_upstream_call_with_the_rejected_shape() -> None:
    async def go() -> SpendCapReached:
        limits, k = limits_at(at(10, 5)), key(week=5_000)  # $0.005 a week
        await spend(limits, k, 6)
        with pytest.raises(SpendCapReached) as refused:
            await limits.admit(k, "b", fixed(0), PRICES)
        doc = usage_document(await limits.standings(k))
        assert doc["limits"][0]["percent"] == 120 and doc["limits"][0]["severity"] == "critical"
        assert doc["limits"][0]["resets_at"] == "2026-12-02T12:00:00.000Z"  # the 9:00 slice's end, a week on
        return refused.value

    err = asyncio.run(go())
    reset = int(dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.timezone.utc).timestamp())
    now = at(10, 5).timestamp()
    assert err.message == ("This key's 7-day USD budget of $0.005 is used up ($0.006 in the last 7 days); it frees "
                           "Dec 2 at 12:00 UTC; ask your gateway's administrators if you need it raised")
    assert err.headers == {"Retry-After": str(int(reset - now)), H + "status": "rejected", H + "reset": str(reset),
                           H + "overage-reset": str(reset), H + "overage-utilization": "1",
                           H + "overage-surpassed-threshold": "1", H + "overage-disabled-reason": "org_spend_cap_reached",
                           H + "overage-period": "weekly"}
    # Rendered once per envelope: Anthropic's billing_error, OpenAI's insufficient_quota; never retried.
    body, _ = render("anthropic", err)
    assert body.startswith(b'{"type":"error","error":{"type":"billing_error","message":"This key')
    assert status_of(err, "anthropic") == 429 and headers_of(err, "anthropic")["x-should-retry"] == "false"
    assert b'"type":"insufficient_quota"' in render("openai_chat", err)[0]


def test_with_several_caps_the_fullest_is_shown_and_the_one_that_frees_last_refuses() -> None:
    async def go() -> None:
        clock = Clock(at(10, 5))
        limits, k = limits_at(clock), key(day=20_000, month=10_000)  # $0.02 a day, $0.01 a month
        await spend(limits, k, 8)
        hold = await limits.admit(k, "a", fixed(0), PRICES)
        headers = answer_headers(hold.standings)
        assert headers[H + "overage-utilization"] == "0.8"  # the month's 80 %, not the day's 40 %
        assert headers[H + "reset"] == str(MONTH.out_at(MONTH.slice_of(clock.now)))
        hold.settle()
        await spend(limits, k, 13)  # $0.021: both spent
        with pytest.raises(SpendCapReached) as refused:
            await limits.admit(k, "b", fixed(0), PRICES)
        assert refused.value.headers[H + "overage-period"] == "monthly"  # frees 30 days on, after the day's
        assert "30-day USD budget of $0.01" in refused.value.message
        doc = usage_document(await limits.standings(k))
        assert [(row["group"], row["is_active"]) for row in doc["limits"]] == [("daily", False), ("monthly", True)]

    asyncio.run(go())


def test_a_budget_the_team_shares_is_refused_as_the_groups_pool() -> None:
    """A team's budget counts what all of its keys spent: one key spends it, another is refused, in
    the words of a group's pool; a key of no team is not."""

    team = TeamInfo(4, "platform", usd_budgets=(("month", 1_000),))

    async def go() -> SpendCapReached:
        limits = limits_at(at(10, 5))
        first, second = (dataclasses.replace(key(key_id), team_id=team.id, team=team) for key_id in (1, 2))
        await spend(limits, first, 2)  # $0.002 of the team's $0.001
        await limits.admit(key(3), "loner", fixed(0), PRICES)  # no team, no cap
        with pytest.raises(SpendCapReached) as refused:
            await limits.admit(second, "b", fixed(0), PRICES)
        return refused.value

    err = asyncio.run(go())
    assert err.headers[H + "overage-scope"] == "group_pool"
    assert err.headers[H + "overage-period"] == "monthly"
    assert err.message.startswith("Your team's shared 30-day USD budget of $0.001 is used up")


def test_the_five_hour_window_has_no_period_in_the_protocol() -> None:
    async def go() -> SpendCapReached:
        limits, k = limits_at(at(10, 5)), key(**{"5h": 1_000})
        await spend(limits, k, 2)
        with pytest.raises(SpendCapReached) as refused:
            await limits.admit(k, "b", fixed(0), PRICES)
        return refused.value

    err = asyncio.run(go())
    assert H + "overage-period" not in err.headers and err.headers[H + "status"] == "rejected"
    assert WEEK.name == "week" and DAY.name == "day"  # the names PERIODS maps
