"""A provider's price table: cost of one request, and what ops may type into it."""

from __future__ import annotations

from decimal import Decimal

import pytest

from accounts.prices import Tokens, cost, validate_prices

TABLE = {
    "gpt-5-mini": {"input": 0.25, "output": 2, "cached": 0.025},
    "claude-*": {"input": 3, "output": 15},
    "claude-opus-*": {"input": 15, "output": 75, "cache_read": 1.5, "cache_write": 18.75, "cache_write_1h": 30},
}


def t(input: int = 0, output: int = 0, read: int = 0, write: int = 0, hour: int = 0) -> Tokens:
    return Tokens(input=input, output=output, cache_read=read, cache_write=write, cache_write_1h=hour)


def test_cost_bills_cached_input_at_the_cached_price() -> None:
    # 800 fresh input × 0.25 + 200 cached × 0.025 + 100 output × 2, per million tokens
    assert cost(TABLE, "gpt-5-mini", t(1000, 100, read=200)) == Decimal("0.000405")


def test_each_kind_of_input_token_is_billed_at_its_own_rate() -> None:
    # 1,000,000 input: 500,000 read (1.5), 300,000 written, 100,000 of them for an hour (18.75, 30),
    # 200,000 plain (15); 10,000 output (75).
    usd = cost(TABLE, "claude-opus-4-6", t(1_000_000, 10_000, read=500_000, write=300_000, hour=100_000))
    assert usd == Decimal("0.75") + Decimal("3.75") + Decimal("3") + Decimal("3") + Decimal("0.75")


def test_cache_rates_a_table_leaves_out_are_anthropics_multiples_of_the_input_rate() -> None:
    # claude-sonnet at 3/M input: reads 0.3, five-minute writes 3.75, hour writes 6.
    assert cost(TABLE, "claude-sonnet-4-6", t(1_000_000, read=1_000_000)) == Decimal("0.3")
    assert cost(TABLE, "claude-sonnet-4-6", t(1_000_000, write=1_000_000)) == Decimal("3.75")
    assert cost(TABLE, "claude-sonnet-4-6", t(1_000_000, write=1_000_000, hour=1_000_000)) == Decimal("6")


def test_counts_that_do_not_add_up_are_clipped_to_the_input() -> None:
    # More reads than input: all of it is a read; writes beyond what is left are not billed again.
    assert cost(TABLE, "claude-sonnet-4-6", t(100, read=500, write=50)) == cost(TABLE, "claude-sonnet-4-6",
                                                                               t(100, read=100))


def test_an_exact_name_beats_a_pattern_and_a_longer_pattern_a_shorter_one() -> None:
    assert cost(TABLE, "claude-opus-4-6", t(1_000_000)) == Decimal(15)
    assert cost(TABLE, "claude-sonnet-4-6", t(1_000_000)) == Decimal(3)
    assert cost({"gpt-5-mini": {"input": 1}, "gpt-*": {"input": 9}}, "gpt-5-mini", t(1_000_000)) == 1


def test_no_price_means_no_cost_rather_than_zero() -> None:
    assert cost(TABLE, "gemini-2.5-pro", t(1000, 100)) is None
    assert cost({}, "gpt-5-mini", t(1000, 100)) is None
    assert cost(None, "gpt-5-mini", t(1000, 100)) is None


def test_decimal_prices_do_not_pick_up_float_noise() -> None:
    assert cost({"m": {"input": 0.1, "output": 0.2}}, "m", t(3, 3)) == Decimal("0.0000009")


@pytest.mark.parametrize("prices, problem", [
    ([], "prices must be an object"),
    ({"m": 3}, "m: must be an object"),
    ({"m": {"input": -1}}, "m: input must be a non-negative number"),
    ({"m": {"output": "lots"}}, "m: output must be a non-negative number"),
    ({"m": {"cached": True}}, "m: cached must be a non-negative number"),
    ({"m": {"cache_write_1h": "nan"}}, "m: cache_write_1h must be a non-negative number"),
    ({"m": {"cached": 1, "cache_read": 1}}, "m: cached is the older name of cache_read"),
    ({"m": {"inptu": 1}}, "m: unknown field(s) inptu"),
])
def test_invalid_price_tables_are_rejected(prices: object, problem: str) -> None:
    assert any(p.startswith(problem) for p in validate_prices(prices))


def test_a_valid_price_table_has_no_problems() -> None:
    assert validate_prices(TABLE) == []
