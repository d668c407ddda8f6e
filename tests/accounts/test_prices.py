"""A provider's price table: cost of one request, and what ops may type into it."""

from __future__ import annotations

from decimal import Decimal

import pytest

from accounts.prices import cost, validate_prices

TABLE = {
    "gpt-5-mini": {"input": 0.25, "output": 2, "cached": 0.025},
    "claude-*": {"input": 3, "output": 15},
    "claude-opus-*": {"input": 15, "output": 75, "cached": 1.5},
}


def test_cost_bills_cached_input_at_the_cached_price() -> None:
    # 800 fresh input × 0.25 + 200 cached × 0.025 + 100 output × 2, per million tokens
    assert cost(TABLE, "gpt-5-mini", 1000, 100, 200) == Decimal("0.000405")


def test_cached_tokens_cost_the_input_price_when_no_cached_price_is_given() -> None:
    assert cost(TABLE, "claude-sonnet-4-6", 1000, 0, 400) == cost(TABLE, "claude-sonnet-4-6", 1000, 0, 0)


def test_an_exact_name_beats_a_pattern_and_a_longer_pattern_a_shorter_one() -> None:
    assert cost(TABLE, "claude-opus-4-6", 1_000_000, 0, 0) == Decimal(15)
    assert cost(TABLE, "claude-sonnet-4-6", 1_000_000, 0, 0) == Decimal(3)
    assert cost({"gpt-5-mini": {"input": 1}, "gpt-*": {"input": 9}}, "gpt-5-mini", 1_000_000, 0, 0) == 1


def test_no_price_means_no_cost_rather_than_zero() -> None:
    assert cost(TABLE, "gemini-2.5-pro", 1000, 100, 0) is None
    assert cost({}, "gpt-5-mini", 1000, 100, 0) is None
    assert cost(None, "gpt-5-mini", 1000, 100, 0) is None


def test_decimal_prices_do_not_pick_up_float_noise() -> None:
    assert cost({"m": {"input": 0.1, "output": 0.2}}, "m", 3, 3, 0) == Decimal("0.0000009")


@pytest.mark.parametrize("prices, problem", [
    ([], "prices must be an object"),
    ({"m": 3}, "m: must be an object"),
    ({"m": {"input": -1}}, "m: input must be a non-negative number"),
    ({"m": {"output": "lots"}}, "m: output must be a non-negative number"),
    ({"m": {"cached": True}}, "m: cached must be a non-negative number"),
    ({"m": {"inptu": 1}}, "m: unknown field(s) inptu"),
])
def test_invalid_price_tables_are_rejected(prices: object, problem: str) -> None:
    assert any(p.startswith(problem) for p in validate_prices(prices))


def test_a_valid_price_table_has_no_problems() -> None:
    assert validate_prices(TABLE) == []
