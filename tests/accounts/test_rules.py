"""The SOP's three tiers plus 401, decided by one function."""

from __future__ import annotations

import pytest

from accounts.rules import DEFAULT_RULES, classify, validate_rules


@pytest.mark.parametrize(("status", "text", "action", "tier"), [
    (403, "Request estimated cost exceeds your limit", "return", "tier1_request_too_large"),
    (403, "You have insufficient tokens for this request", "retry", "tier2_insufficient_tokens"),
    (403, "Please UPGRADE YOUR PLAN", "retry", "tier2_insufficient_tokens"),
    (403, "daily limit reached", "retry", "tier2_insufficient_tokens"),
    (429, "rate limited", "disable", "tier3_account_exhausted"),
    (402, "payment required", "disable", "tier3_account_exhausted"),
    (401, "invalid api key", "disable", "auth_invalid"),
    (403, "forbidden for another reason", "return", "other"),
    (500, "internal error", "return", "other"),
    (400, "bad request", "return", "other"),
])
def test_default_rules_follow_the_sop(status: int, text: str, action: str, tier: str) -> None:
    verdict = classify(DEFAULT_RULES, status, text)
    assert (verdict.action, verdict.tier) == (action, tier)


def test_first_matching_rule_wins_and_rules_are_per_provider() -> None:
    rules = [{"name": "flaky", "status": [500], "contains": [], "action": "retry", "tier": "flaky"}, *DEFAULT_RULES]
    assert classify(rules, 500, "boom").action == "retry"
    assert classify(DEFAULT_RULES, 500, "boom").action == "return"


def test_rule_validation_names_the_problem() -> None:
    assert validate_rules(DEFAULT_RULES) == []
    problems = validate_rules([{"action": "explode", "status": "x"}])
    assert any("action" in p for p in problems)
    assert any("status" in p for p in problems)
    assert validate_rules({"not": "a list"}) == ["rules must be a list of objects"]
