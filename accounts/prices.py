"""What a request cost, from a provider's price table (USD per million tokens by upstream model).

A table looks like ``{"claude-sonnet-4-6": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75,
"cache_write_1h": 6}}``; keys may be glob patterns (``"claude-*"``), an exact name wins over a pattern and
the longest pattern over a shorter one.

Each kind of input token has its own rate (``translation.ir.Usage``: cache reads and writes are subsets
of the input tokens):

- ``cache_read``: input read from the provider's prompt cache (Anthropic ``cache_read_input_tokens``,
  OpenAI ``cached_tokens``). Absent: a tenth of the input rate, as Anthropic and OpenAI's current models
  bill it. ``cached`` is its older name, still read.
- ``cache_write``: input written to the cache for five minutes (Anthropic ``cache_creation_input_tokens``).
  Absent: 1.25 × the input rate (Anthropic's price).
- ``cache_write_1h``: input written for an hour (Anthropic ``ttl: "1h"``). Absent: 2 × the input rate.
- ``input``: the rest of the input, ``output``: output tokens (reasoning included).

OpenAI reports no cache writes: it bills the input that fills its cache at the input rate, which is what
such input costs here (it is neither read nor written in the usage).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from fnmatch import fnmatchcase
from typing import Any

from . import formats

PER = Decimal(1_000_000)
PRICE_KEYS = ("input", "output", "cache_read", "cache_write", "cache_write_1h", "cached")
# A cache rate given as a multiple of the input rate when the table does not name it (Anthropic's prices).
DEFAULT_FACTORS = {"cache_read": Decimal("0.1"), "cache_write": Decimal("1.25"), "cache_write_1h": Decimal(2)}


@dataclass(frozen=True)
class Tokens:
    """One request's tokens by how they are billed. ``input`` counts every input token, the cache reads
    and writes included; ``cache_write_1h`` is the part of ``cache_write`` kept an hour."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0


def price_for(prices: dict[str, Any] | None, model: str) -> dict[str, Any] | None:
    if not prices or not model:
        return None
    if model in prices:
        return prices[model]  # type: ignore[no-any-return]
    patterns = [p for p in prices if any(c in p for c in "*?[") and fnmatchcase(model, p)]
    return prices[max(patterns, key=len)] if patterns else None


def rate(price: dict[str, Any], name: str) -> Decimal:
    """One of a model's rates (``PRICE_KEYS``); a cache rate the entry omits is its multiple of the input rate
    (``DEFAULT_FACTORS``)."""

    for key in (name, "cached") if name == "cache_read" else (name,):
        if price.get(key) is not None:
            return _decimal(price[key])
    factor = DEFAULT_FACTORS.get(name)
    return _decimal(price.get("input")) * factor if factor is not None else Decimal(0)


def cost(prices: dict[str, Any] | None, model: str, tokens: Tokens) -> Decimal | None:
    """USD for one request, or None when the table has no price for the model."""

    return cost_at(price_for(prices, model), tokens)


def cost_at(price: dict[str, Any] | None, tokens: Tokens) -> Decimal | None:
    """USD for one request at one model's price (``price_for``'s answer), None without a price.

    Counts that do not fit together (more cache reads than input, an upstream's bad arithmetic) are
    clipped: reads to the input, writes to what is left, hour-long writes to the writes."""

    if not isinstance(price, dict):
        return None
    total_in = max(tokens.input, 0)
    read = min(max(tokens.cache_read, 0), total_in)
    write = min(max(tokens.cache_write, 0), total_in - read)
    hour = min(max(tokens.cache_write_1h, 0), write)
    # Only the kinds the request has are looked up: most requests have no cache writes.
    total = rate(price, "input") * (total_in - read - write) + rate(price, "output") * max(tokens.output, 0)
    for name, count in (("cache_read", read), ("cache_write", write - hour), ("cache_write_1h", hour)):
        if count:
            total += rate(price, name) * count
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
        return ["prices must be an object: model → {input, output, cache_read, cache_write, cache_write_1h}"]
    problems: list[str] = []
    for model, price in prices.items():
        if not isinstance(price, dict):
            problems.append(f"{model}: must be an object with input/output/cache_read/cache_write/cache_write_1h "
                            "prices")
            continue
        unknown = set(price) - set(PRICE_KEYS)
        if unknown:
            problems.append(f"{model}: unknown field(s) {', '.join(sorted(unknown))}")
        if "cached" in price and "cache_read" in price:
            problems.append(f"{model}: cached is the older name of cache_read; give one of them")
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
