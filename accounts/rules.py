"""Upstream error classification: one function, rules editable per provider.

The defaults are the SOP's three tiers plus 401. A rule matches on the HTTP
status and, optionally, on any of several case-insensitive substrings of the
upstream's error text; the first matching rule decides. Network failures never
reach these rules: they always move on without blaming the account.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .outcomes import RULE_ACTIONS, Verdict

DEFAULT_RULES: list[dict[str, Any]] = [
    {"name": "request_too_large", "status": [403], "contains": ["estimated cost"],
     "action": "return", "tier": "tier1_request_too_large"},
    {"name": "insufficient_tokens", "status": [403],
     "contains": ["insufficient tokens", "upgrade your plan", "limit reached"],
     "action": "retry", "tier": "tier2_insufficient_tokens"},
    {"name": "exhausted", "status": [429, 402], "contains": [],
     "action": "disable", "tier": "tier3_account_exhausted"},
    {"name": "auth_invalid", "status": [401], "contains": [],
     "action": "disable", "tier": "auth_invalid"},
]


@dataclass(frozen=True)
class Ruling:
    action: Verdict  # one of RULE_ACTIONS
    tier: str
    rule: str


# Anything no rule claims goes back to the client unchanged: don't mask unknown issues.
UNCLAIMED = Ruling(Verdict.RETURN, "other", "")


def classify(rules: list[dict[str, Any]] | None, status: int, text: str) -> Ruling:
    lowered = text.lower()
    for rule in rules if rules is not None else DEFAULT_RULES:
        statuses = rule.get("status") or []
        if isinstance(statuses, int):
            statuses = [statuses]
        if statuses and status not in statuses:
            continue
        needles = [str(n).lower() for n in rule.get("contains") or []]
        if needles and not any(n in lowered for n in needles):
            continue
        action = rule.get("action", Verdict.RETURN)
        if action not in RULE_ACTIONS:
            continue
        return Ruling(Verdict(action), str(rule.get("tier", "")), str(rule.get("name", "")))
    return UNCLAIMED


def validate_rules(rules: Any) -> list[str]:
    """Problems with an ops-edited rule list, for the admin form."""

    problems: list[str] = []
    if not isinstance(rules, list):
        return ["rules must be a list of objects"]
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict):
            problems.append(f"rule {i}: must be an object")
            continue
        if rule.get("action") not in RULE_ACTIONS:
            problems.append(f"rule {i}: action must be return, retry or disable")
        statuses = rule.get("status", [])
        if not isinstance(statuses, (int, list)) or (
            isinstance(statuses, list) and not all(isinstance(s, int) for s in statuses)
        ):
            problems.append(f"rule {i}: status must be an integer or a list of integers")
        if not isinstance(rule.get("contains", []), list):
            problems.append(f"rule {i}: contains must be a list of strings")
    return problems
