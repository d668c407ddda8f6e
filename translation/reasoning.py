"""Reasoning effort ↔ thinking budget: one table, used by every protocol.

OpenAI speaks in efforts (``reasoning_effort`` / ``reasoning.effort``),
Anthropic in token budgets (``thinking.budget_tokens``) or, lately, efforts
(``output_config.effort``). The budgets follow Anthropic's guidance that 1,024
is the minimum and a few thousand tokens covers most tasks.
"""

from __future__ import annotations

EFFORT_BUDGETS: dict[str, int] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 24576,
    "xhigh": 32000,
    "max": 32000,
}
MIN_BUDGET = 1024
# Anthropic's "adaptive" thinking lets the model decide; OpenAI's default effort is medium.
ADAPTIVE_EFFORT = "medium"


def effort_to_budget(effort: str | None) -> int:
    if effort is None:
        return EFFORT_BUDGETS[ADAPTIVE_EFFORT]
    return EFFORT_BUDGETS.get(effort, EFFORT_BUDGETS[ADAPTIVE_EFFORT])


def budget_to_effort(budget: int | None) -> str:
    """The smallest effort whose budget covers ``budget``."""

    if budget is None:
        return ADAPTIVE_EFFORT
    for effort in ("low", "medium", "high"):
        if budget <= EFFORT_BUDGETS[effort]:
            return effort
    return "high"
