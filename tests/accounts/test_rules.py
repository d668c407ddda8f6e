"""The SOP's three tiers plus 401, decided by one function."""

from __future__ import annotations

import importlib

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
    (500, "internal error", "retry", "upstream_unavailable"),
    (502, "bad gateway", "retry", "upstream_unavailable"),
    (503, "unavailable", "retry", "upstream_unavailable"),
    (504, "gateway timeout", "retry", "upstream_unavailable"),
    (529, "Overloaded", "retry", "upstream_unavailable"),
    (501, "not implemented", "return", "other"),
    (400, "bad request", "return", "other"),
])
def test_default_rules_follow_the_sop(status: int, text: str, action: str, tier: str) -> None:
    verdict = classify(DEFAULT_RULES, status, text)
    assert (verdict.action, verdict.tier) == (action, tier)


def test_first_matching_rule_wins_and_rules_are_per_provider() -> None:
    rules = [{"name": "strict", "status": [500], "contains": [], "action": "return", "tier": "strict"}, *DEFAULT_RULES]
    assert classify(rules, 500, "boom").action == "return"
    assert classify(DEFAULT_RULES, 500, "boom").action == "retry"


def test_the_sops_three_tiers_and_401_come_first_unchanged() -> None:
    assert [(r["name"], r["status"], r["contains"], r["action"], r["tier"]) for r in DEFAULT_RULES[:4]] == [
        ("request_too_large", [403], ["estimated cost"], "return", "tier1_request_too_large"),
        ("insufficient_tokens", [403], ["insufficient tokens", "upgrade your plan", "limit reached"], "retry",
         "tier2_insufficient_tokens"),
        ("exhausted", [429, 402], [], "disable", "tier3_account_exhausted"),
        ("auth_invalid", [401], [], "disable", "auth_invalid"),
    ]


@pytest.mark.parametrize(("status", "seconds"), [(429, 600), (402, 6 * 3600), (401, 3600)])
def test_the_default_rules_test_a_disabled_account_again_on_a_schedule(status: int, seconds: int) -> None:
    assert classify(DEFAULT_RULES, status, "").retest_after == seconds


def test_a_retest_is_per_rule_or_per_status_and_only_for_rules_that_disable() -> None:
    rules = [{"name": "a", "status": [401], "action": "disable", "retest_after": 5},
             {"name": "b", "status": [429, 402], "action": "disable", "retest_after": {"429": 60}},
             {"name": "c", "status": [403], "action": "disable"}]
    assert [classify(rules, s, "").retest_after for s in (401, 429, 402, 403)] == [5, 60, None, None]
    assert classify(DEFAULT_RULES, 500, "").retest_after is None  # retried: nothing was disabled


@pytest.mark.parametrize(("retest", "problem"), [
    (0, "retest_after must be a number of seconds above 0"),
    ("600", "retest_after must be a number of seconds above 0"),
    (True, "retest_after must be a number of seconds above 0"),
    ({"429": -1}, "retest_after must be a number of seconds above 0"),
    ({"rate": 60}, "retest_after by status needs status codes as keys"),
])
def test_a_bad_retest_after_is_named(retest: object, problem: str) -> None:
    [found] = validate_rules([{"status": [429], "action": "disable", "retest_after": retest}])
    assert problem in found


def test_a_retest_after_on_a_rule_that_does_not_disable_is_refused() -> None:
    [found] = validate_rules([{"status": [500], "action": "retry", "retest_after": 60}])
    assert "only to rules whose action is disable" in found
    assert validate_rules([{"status": [429], "action": "disable", "retest_after": None}]) == []


def test_rule_validation_names_the_problem() -> None:
    assert validate_rules(DEFAULT_RULES) == []
    problems = validate_rules([{"action": "explode", "status": "x"}])
    assert any("action" in p for p in problems)
    assert any("status" in p for p in problems)
    assert validate_rules({"not": "a list"}) == ["rules must be a list of objects"]


@pytest.mark.django_db
def test_the_migration_brings_providers_on_the_old_defaults_to_the_new_ones_and_leaves_custom_rules() -> None:
    from django.apps import apps

    from accounts.models import Provider

    migration = importlib.import_module("accounts.migrations.0010_rules_upstream_unavailable")
    assert migration.NEW_DEFAULTS == DEFAULT_RULES  # what a new provider gets, an old one gets too
    custom = [*migration.OLD_DEFAULTS[:3], {"name": "flaky", "status": [500], "action": "retry", "tier": "flaky"}]
    old = Provider.objects.create(name="old", protocol="openai_chat", base_url="http://x/v1",
                                  rules=migration.OLD_DEFAULTS)
    mine = Provider.objects.create(name="mine", protocol="openai_chat", base_url="http://x/v1", rules=custom)
    migration.forward(apps, None)
    old.refresh_from_db()
    mine.refresh_from_db()
    assert old.rules == DEFAULT_RULES and mine.rules == custom
    migration.backward(apps, None)
    old.refresh_from_db()
    assert old.rules == migration.OLD_DEFAULTS
