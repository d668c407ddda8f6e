"""What a request cost, from a provider's price table (USD per million tokens by upstream model).

A table looks like ``{"gpt-5-mini": {"input": 0.25, "output": 2, "cached": 0.025}}``;
keys may be glob patterns (``"claude-*"``), an exact name wins over a pattern and
the longest pattern over a shorter one. Cached input tokens are a subset of the
input tokens (see ``translation.ir.Usage``): they are billed at the ``cached``
price when one is given, else at the input price.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal, InvalidOperation
from fnmatch import fnmatchcase
from typing import Any

from . import formats

PER = Decimal(1_000_000)
PRICE_KEYS = ("input", "output", "cached")


def price_for(prices: dict[str, Any] | None, model: str) -> dict[str, Any] | None:
    if not prices or not model:
        return None
    if model in prices:
        return prices[model]  # type: ignore[no-any-return]
    patterns = [p for p in prices if any(c in p for c in "*?[") and fnmatchcase(model, p)]
    return prices[max(patterns, key=len)] if patterns else None


def cost(prices: dict[str, Any] | None, model: str, input_tokens: int, output_tokens: int,
         cached_tokens: int) -> Decimal | None:
    """USD for one request, or None when the table has no price for the model."""

    return cost_at(price_for(prices, model), input_tokens, output_tokens, cached_tokens)


def cost_at(price: dict[str, Any] | None, input_tokens: int, output_tokens: int,
            cached_tokens: int) -> Decimal | None:
    """USD for one request at one model's price (``price_for``'s answer), None without a price."""

    if not isinstance(price, dict):
        return None
    rate_in = _decimal(price.get("input"))
    rate_out = _decimal(price.get("output"))
    rate_cached = _decimal(price.get("cached", price.get("input")))
    cached = min(max(cached_tokens, 0), max(input_tokens, 0))
    total = (rate_in * (max(input_tokens, 0) - cached) + rate_cached * cached
             + rate_out * max(output_tokens, 0))
    return total / PER


def micro_dollars(usd: Decimal | int | float) -> int:
    """Whole micro-dollars, rounded up: budgets count in them so that every amount is an integer Redis can add."""

    return int((Decimal(str(usd)) * 1_000_000).to_integral_value(ROUND_CEILING))


def dollars(micros: int) -> str:
    """"$5.00", "$0.0042": cents always, more places only when the amount has them."""

    return formats.money(Decimal(micros) / 1_000_000)


def _decimal(value: Any) -> Decimal:
    # Via str(): 0.1 becomes Decimal("0.1"), not the float's binary expansion.
    return Decimal(str(value)) if value is not None else Decimal(0)


def validate_prices(prices: Any) -> list[str]:
    """Problems with an ops-edited price table, for the admin form and the config loader."""

    if not isinstance(prices, dict):
        return ["prices must be an object: model → {input, output, cached}"]
    problems: list[str] = []
    for model, price in prices.items():
        if not isinstance(price, dict):
            problems.append(f"{model}: must be an object with input/output/cached prices")
            continue
        unknown = set(price) - set(PRICE_KEYS)
        if unknown:
            problems.append(f"{model}: unknown field(s) {', '.join(sorted(unknown))}")
        for key in PRICE_KEYS:
            if key not in price:
                continue
            value = price[key]
            try:
                ok = not isinstance(value, bool) and Decimal(str(value)) >= 0
            except InvalidOperation:
                ok = False
            if not ok:
                problems.append(f"{model}: {key} must be a non-negative number")
    return problems
