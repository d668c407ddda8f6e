"""Effort names between OpenAI (none…xhigh) and Anthropic (low…max)."""

import pytest

from translation import ir
from translation.reasoning import anthropic_effort, openai_effort


@pytest.mark.parametrize("effort, expected", [
    ("minimal", "low"), ("low", "low"), ("medium", "medium"), ("high", "high"), ("xhigh", "xhigh"), ("max", "max"),
])
def test_anthropic_effort(effort: str, expected: str) -> None:
    assert anthropic_effort(effort) == expected


@pytest.mark.parametrize("wanted, expected", [
    (ir.Reasoning(effort="minimal"), "minimal"),
    (ir.Reasoning(effort="xhigh"), "xhigh"),
    (ir.Reasoning(effort="max"), "xhigh"),  # Anthropic's top level is OpenAI's top level
    (ir.Reasoning(budget_tokens=2000), "low"),
    (ir.Reasoning(budget_tokens=30000), "high"),
    (ir.Reasoning(), "medium"),
])
def test_openai_effort(wanted: ir.Reasoning, expected: str) -> None:
    assert openai_effort(wanted) == expected
