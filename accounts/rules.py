"""Upstream error classification: one function, rules editable per provider.

The defaults are the SOP's three tiers plus 401, then a 5xx (Anthropic's 529
"overloaded" among them) tried on the next account without disabling anything:
a failing upstream is nobody's account's fault. A rule matches on the HTTP
status and, optionally, on any of several case-insensitive substrings of the
upstream's error text; the first matching rule decides. Network failures never
reach these rules: they always move on without blaming the account.

A rule that disables may say when the account is tested again (``retest_after``:
seconds, or seconds by status as ``{"429": 600}``; absent or null: never, ops
decide). The pool's leader (``gateway.background.poolhealth``) queues the test when it is
due; an account that answers is back in the pool. The defaults: a 429 without
Retry-After every 10 minutes (rate limits of a minute or an hour are the common
ones), a 402 every 6 hours (someone has to add credit), a 401 every hour (a key
revoked by mistake and restored). A 429 with Retry-After is not tested: its
cool-down ends at the time the upstream named.
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
     "action": "disable", "tier": "tier3_account_exhausted", "retest_after": {"429": 600, "402": 21600}},
    {"name": "auth_invalid", "status": [401], "contains": [],
     "action": "disable", "tier": "auth_invalid", "retest_after": 3600},
    # 501 and 505 are not here: they say the request cannot be served, which another account won't change.
    {"name": "upstream_unavailable", "status": [500, 502, 503, 504, 529], "contains": [],
     "action": "retry", "tier": "upstream_unavailable"},
]


@dataclass(frozen=True)
class Ruling:
    action: Verdict  # one of RULE_ACTIONS
    tier: str
    rule: str
    retest_after: float | None = None  # seconds until a disabled account is tested again; None: never


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
        return Ruling(Verdict(action), str(rule.get("tier", "")), str(rule.get("name", "")),
                      retest_after(rule.get("retest_after"), status) if action == Verdict.DISABLE else None)
    return UNCLAIMED


def retest_after(value: Any, status: int) -> float | None:
    """A rule's ``retest_after`` for this status: seconds, or None (never)."""

    if isinstance(value, dict):
        value = value.get(str(status))
    return float(value) if _seconds(value) else None


def _seconds(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


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
        problems += _retest_problems(i, rule)
    return problems


def _retest_problems(i: int, rule: dict[str, Any]) -> list[str]:
    value = rule.get("retest_after")
    if value is None:
        return []
    if rule.get("action") != Verdict.DISABLE:
        return [f"rule {i}: retest_after applies only to rules whose action is disable"]
    by_status = value.items() if isinstance(value, dict) else [("", value)]
    for status, seconds in by_status:
        if isinstance(value, dict) and not (isinstance(status, str) and status.isdigit()):
            return [f'rule {i}: retest_after by status needs status codes as keys: {{"429": 600}}']
        if not _seconds(seconds):
            return [f"rule {i}: retest_after must be a number of seconds above 0, or an object of them by status"]
    return []
