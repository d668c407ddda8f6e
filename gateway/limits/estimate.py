"""How much a request reserves of its key's token budget before it is sent: input + the most it may answer.

Input: Anthropic bodies through the count_tokens estimate (``gateway.limits.tokens``,
which also prices images and PDFs by Anthropic's rules); Chat and Responses
bodies at a quarter of their size in bytes, which counts JSON punctuation and
base64 media too and so errs high, the safe side for a reservation. Output:
the request's own cap (``max_tokens``, ``max_completion_tokens``,
``max_output_tokens``, times ``n`` choices), or ``GATEWAY_RESERVE_OUTPUT_TOKENS``
when it sets none. A USD budget reserves the same tokens priced by the route's
provider (input at the input price, the output cap at the output price). A
request that stops earlier gives the difference back when it is settled; one that answers more than its reservation (no cap, a long
answer) is charged what it used, so the estimate bounds how far a burst can
overshoot, not what a request may use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accounts.prices import Tokens, cost, micro_dollars
from translation import ir, registry

from ..errors import NestingTooDeep
from .budgets import USD, Budget
from .tokens import estimate_input_tokens


def input_tokens_of(client: str, body: dict[str, Any], body_bytes: int) -> int:
    if registry.get(client).COUNTED_BY_CONTENT:
        try:
            return estimate_input_tokens(body)
        except NestingTooDeep:
            pass  # refused later, where the body is serialised; the size will do meanwhile
    return body_bytes // 4


def output_cap(request: ir.Request, default_output: int) -> int:
    cap = request.max_tokens if request.max_tokens is not None and request.max_tokens > 0 else default_output
    return cap * max(1, request.choices)


def tokens_to_reserve(client: str, body: dict[str, Any], request: ir.Request, body_bytes: int,
                      default_output: int) -> int:
    return max(1, input_tokens_of(client, body, body_bytes) + output_cap(request, default_output))


def usd_to_reserve(client: str, body: dict[str, Any], request: ir.Request, body_bytes: int, default_output: int,
                   prices: dict[str, Any] | None, model: str) -> int:
    """Micro-dollars: the token reservation priced by the route's provider (0 when it has no price for the
    model: such requests are not charged to a USD budget either, see ``budgets.usd_of``)."""

    usd = cost(prices, model, Tokens(input=input_tokens_of(client, body, body_bytes),
                                     output=output_cap(request, default_output)))
    return micro_dollars(usd) if usd else 0


def request_estimate(client: str, body: dict[str, Any], request: ir.Request, body_bytes: int,
                     default_output: int, prices: dict[str, Any] | None = None,
                     model: str = "") -> Callable[[Budget], int]:
    """What a request may spend of each of its key's budgets (``Limits.admit`` asks per budget);
    ``prices`` and ``model``: the route's provider's price table and the upstream model, for USD budgets."""

    def estimate(budget: Budget) -> int:
        if budget.unit == "tokens":
            return tokens_to_reserve(client, body, request, body_bytes, default_output)
        if budget.unit == USD:
            return usd_to_reserve(client, body, request, body_bytes, default_output, prices, model)
        raise ValueError(f"no estimate for a budget in {budget.unit}")

    return estimate
