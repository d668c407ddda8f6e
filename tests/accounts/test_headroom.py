"""Reading the providers' rate-limit headers into an account's headroom, and what a request needs of it."""

from __future__ import annotations

import datetime as dt

import pytest

from accounts.headroom import UNTIMED_SECONDS, Headroom, Limit, Need, duration, parse, retry_after, summary

NOW = 1_800_000_000.0

ANTHROPIC = {  # as the Messages API sends them (docs.anthropic.com, rate limits)
    "anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "49",
    "anthropic-ratelimit-requests-reset": "2027-01-15T08:00:01Z",
    "anthropic-ratelimit-tokens-limit": "40000", "anthropic-ratelimit-tokens-remaining": "39000",
    "anthropic-ratelimit-tokens-reset": "2027-01-15T08:00:06Z",
    "anthropic-ratelimit-input-tokens-limit": "30000", "anthropic-ratelimit-input-tokens-remaining": "29000",
    "anthropic-ratelimit-input-tokens-reset": "2027-01-15T08:00:06+00:00",
    "anthropic-ratelimit-output-tokens-limit": "8000", "anthropic-ratelimit-output-tokens-remaining": "8000",
    "anthropic-ratelimit-output-tokens-reset": "2027-01-15T08:00:00Z",
}
OPENAI = {  # as the Chat and Responses APIs send them (platform.openai.com, rate limits)
    "x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "59", "x-ratelimit-reset-requests": "1s",
    "x-ratelimit-limit-tokens": "150000", "x-ratelimit-remaining-tokens": "149984",
    "x-ratelimit-reset-tokens": "6m0s",
}


def test_anthropics_family_reads_every_kind_with_its_rfc3339_reset() -> None:
    limits = parse(ANTHROPIC, NOW)
    assert set(limits) == {"requests", "tokens", "input_tokens", "output_tokens"}
    assert limits["requests"] == Limit(49, dt.datetime(2027, 1, 15, 8, 0, 1, tzinfo=dt.timezone.utc).timestamp(), 50)
    assert limits["input_tokens"].remaining == 29000 and limits["input_tokens"].limit == 30000
    assert limits["tokens"].reset_at - limits["requests"].reset_at == 5.0


def test_openais_family_reads_durations_from_now() -> None:
    limits = parse(OPENAI, NOW)
    assert limits["requests"] == Limit(59, NOW + 1, 60)
    assert limits["tokens"] == Limit(149984, NOW + 360, 150000)


@pytest.mark.parametrize(("text", "seconds"), [("20ms", 0.02), ("1s", 1), ("6m0s", 360), ("1h2m3.5s", 3723.5),
                                               ("17", 17), ("0.5", 0.5), ("500us", 0.0005)])
def test_durations(text: str, seconds: float) -> None:
    assert duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "1x", "s1", "1s garbage"])
def test_a_duration_that_cannot_be_read_is_none(text: str) -> None:
    assert duration(text) is None


def test_nonsense_headers_report_nothing_rather_than_fail() -> None:
    assert parse({"x-ratelimit-remaining-requests": "many"}, NOW) == {}
    odd = parse({"anthropic-ratelimit-requests-remaining": "3", "anthropic-ratelimit-requests-reset": "tomorrow"}, NOW)
    assert odd["requests"] == Limit(3, 0.0, None)


def test_short_until_names_the_reset_of_the_limit_the_request_would_overrun() -> None:
    headroom = Headroom(NOW, {"requests": Limit(1, NOW + 10, 50), "tokens": Limit(500, NOW + 30, 40000)})
    assert headroom.short_until(Need(input_tokens=400), NOW) is None
    assert headroom.short_until(Need(input_tokens=600), NOW) == NOW + 30
    headroom.charge(Need(input_tokens=400))  # sent: one request and 400 tokens fewer until the next report
    assert headroom.short_until(Need(input_tokens=50), NOW) == NOW + 10  # no request left until then
    # Past the resets the limits are full again.
    assert headroom.short_until(Need(input_tokens=10**6), NOW + 31) is None


def test_a_limit_without_a_reset_counts_for_a_while_and_a_429_until_its_retry_after() -> None:
    headroom = Headroom(NOW, {"requests": Limit(0, 0.0)})
    assert headroom.short_until(Need(), NOW + 1) == NOW + UNTIMED_SECONDS
    assert headroom.short_until(Need(), NOW + UNTIMED_SECONDS + 1) is None
    blocked = Headroom(NOW, {}, blocked_until=NOW + 20)
    assert blocked.short_until(Need(), NOW) == NOW + 20 and blocked.short_until(Need(), NOW + 21) is None


def test_output_is_not_checked_against_max_tokens() -> None:
    """Claude Code asks for 32,000 output tokens with 8,000 a minute left: the provider serves it."""

    headroom = Headroom(NOW, parse(ANTHROPIC, NOW))
    assert headroom.short_until(Need(input_tokens=1000), NOW) is None


def test_retry_after_in_seconds_or_as_a_date() -> None:
    assert retry_after({"retry-after": "30"}, NOW) == NOW + 30
    assert retry_after({"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}, NOW) == pytest.approx(1792567680.0)
    assert retry_after({"retry-after": "later"}, NOW) is None and retry_after({}, NOW) is None


def test_the_stored_form_reads_back_and_summarises() -> None:
    headroom = Headroom(NOW, parse(OPENAI, NOW), blocked_until=0.0)
    again = Headroom.from_json(headroom.to_json())
    assert again == headroom
    assert Headroom.from_json({"at": "x"}) is None and Headroom.from_json(None) is None
    text = summary(headroom.to_json(), NOW)
    assert "requests 59/60 (reset in 1 s)" in text and "tokens 149,984/150,000 (reset in 360 s)" in text
    assert "full again" in summary(headroom.to_json(), NOW + 400)
