"""Reasoning effort ↔ thinking budget, and effort names between protocols: used by every builder.

OpenAI speaks in efforts (``reasoning_effort`` / ``reasoning.effort``: none, minimal,
low, medium, high, xhigh), Anthropic in efforts too (``output_config.effort`` with
``thinking: {"type": "adaptive"}``: low, medium, high, xhigh, max) or, on models before
Claude 4.6, in token budgets (``thinking.budget_tokens``). The budgets follow
Anthropic's guidance that 1,024 is the minimum and a few thousand tokens covers most
tasks.
"""

from __future__ import annotations

from .ir import Reasoning

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


# Effort names each side accepts; a name the other side lacks maps to its nearest
# neighbour (OpenAI has no "max", Anthropic no "minimal").
OPENAI_EFFORTS = ("minimal", "low", "medium", "high", "xhigh")
ANTHROPIC_EFFORTS = ("low", "medium", "high", "xhigh", "max")
_TO_OPENAI = {"max": "xhigh"}
_TO_ANTHROPIC = {"minimal": "low"}


def openai_effort(wanted: Reasoning) -> str:
    """``reasoning_effort`` / ``reasoning.effort`` for what the client asked."""

    effort = _TO_OPENAI.get(wanted.effort or "", wanted.effort)
    if effort in OPENAI_EFFORTS:
        return effort
    return budget_to_effort(wanted.budget_tokens if wanted.effort is None else effort_to_budget(wanted.effort))


def anthropic_effort(effort: str) -> str:
    """``output_config.effort`` for an effort named by any protocol."""

    effort = _TO_ANTHROPIC.get(effort, effort)
    return effort if effort in ANTHROPIC_EFFORTS else budget_to_effort(effort_to_budget(effort))
