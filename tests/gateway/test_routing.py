"""Model routing: what the client asked for → (provider, upstream model), from a config snapshot."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.errors import ModelNotFound, PermissionDenied
from gateway.exchange.routing import check_allowed, may_use, pattern_matches, resolve, vendor_prefixed
from gateway.state import AliasInfo, KeyInfo, ProviderInfo, Snapshot
from translation.ir import UpstreamCaps


def provider(pid: int, name: str, served: tuple[str, ...] = (), auto_prefix: bool = False) -> ProviderInfo:
    return ProviderInfo(id=pid, name=name, protocol="openai_chat", base_url="http://127.0.0.1:9/v1", headers={},
                        served_models=served, selection="lru", connect_timeout=1, first_byte_timeout=1,
                        idle_timeout=1, proxy_url="", caps=UpstreamCaps(), anthropic_version="2023-06-01",
                        rules=[], auto_prefix=auto_prefix)


def alias(pattern: str, pid: int, upstream: str = "*", priority: int = 0) -> AliasInfo:
    return AliasInfo(pattern, any(c in pattern for c in "*?["), pid, upstream, priority)


def snapshot(providers: list[ProviderInfo], aliases: list[AliasInfo] = ()) -> Snapshot:  # type: ignore[assignment]
    # As state._load orders them: priority first, then creation order.
    ordered = sorted(enumerate(aliases), key=lambda ia: (-ia[1].priority, ia[0]))
    return Snapshot(providers={p.id: p for p in providers}, aliases=[a for _, a in ordered])


def route(model: str, snap: Snapshot) -> tuple[str, str]:
    r = resolve(model, snap)
    return r.provider.name, r.upstream_model


ANTHROPIC, OPENAI, ROUTER = provider(1, "anthropic-pool"), provider(2, "openai-pool"), provider(3, "router",
                                                                                               auto_prefix=True)


def test_an_exact_alias_beats_any_glob_whatever_its_priority() -> None:
    snap = snapshot([ANTHROPIC, OPENAI], [alias("claude-*", 1, priority=100),
                                          alias("claude-house", 2, "gpt-5-mini")])
    assert route("claude-house", snap) == ("openai-pool", "gpt-5-mini")
    assert route("claude-sonnet-4-6", snap) == ("anthropic-pool", "claude-sonnet-4-6")


def test_among_globs_priority_wins_then_the_most_specific_pattern() -> None:
    snap = snapshot([ANTHROPIC, OPENAI], [alias("claude-*", 1), alias("claude-opus-*", 2, "big"),
                                          alias("*", 2, "fallback", priority=-1)])
    assert route("claude-opus-4-6", snap) == ("openai-pool", "big")  # longer literal part
    assert route("claude-sonnet-4-6", snap) == ("anthropic-pool", "claude-sonnet-4-6")
    assert route("anything-else", snap) == ("openai-pool", "fallback")
    raised = snapshot([ANTHROPIC, OPENAI], [alias("claude-opus-*", 2, "big"), alias("claude-*", 1, priority=5)])
    assert route("claude-opus-4-6", raised) == ("anthropic-pool", "claude-opus-4-6")


def test_a_star_target_keeps_the_clients_name_and_a_fixed_target_replaces_it() -> None:
    snap = snapshot([OPENAI], [alias("gpt-*", 2), alias("fast", 2, "gpt-5-mini")])
    assert route("gpt-5", snap) == ("openai-pool", "gpt-5")
    assert route("fast", snap) == ("openai-pool", "gpt-5-mini")


def test_a_provider_serving_the_name_gets_it_unchanged() -> None:
    snap = snapshot([ANTHROPIC, provider(2, "openai-pool", served=("gpt-5-mini",))])
    assert route("gpt-5-mini", snap) == ("openai-pool", "gpt-5-mini")


def test_a_provider_name_prefix_routes_to_that_provider() -> None:
    snap = snapshot([ANTHROPIC, OPENAI])
    assert route("openai-pool/gpt-5", snap) == ("openai-pool", "gpt-5")
    assert route("anthropic-pool/claude-haiku-4-5", snap) == ("anthropic-pool", "claude-haiku-4-5")
    with pytest.raises(ModelNotFound):
        resolve("nobody/gpt-5", snap)


@pytest.mark.parametrize("legacy, current", [
    ("claude-3-5-sonnet-20241022", "claude-sonnet-4-5"),
    ("claude-3-opus-20240229", "claude-opus-4-6"),
])
def test_legacy_names_are_renamed_before_any_glob_sends_them_upstream(legacy: str, current: str) -> None:
    snap = snapshot([ANTHROPIC], [alias("claude-*", 1)])
    assert route(legacy, snap) == ("anthropic-pool", current)


def test_an_exact_alias_for_a_legacy_name_overrides_the_legacy_table() -> None:
    snap = snapshot([ANTHROPIC], [alias("claude-*", 1), alias("claude-3-opus-20240229", 1, "claude-3-opus-pinned")])
    assert route("claude-3-opus-20240229", snap) == ("anthropic-pool", "claude-3-opus-pinned")


@pytest.mark.parametrize("asked, sent", [
    ("claude-sonnet-4-6", "anthropic/claude-sonnet-4-6"),
    ("claude-opus-4-6", "anthropic/claude-opus-4-6"),
    ("gpt-5-mini", "openai/gpt-5-mini"),
    ("gemini-2.5-pro", "google/gemini-2.5-pro"),
    ("grok-4", "xai/grok-4"),
    ("mistral-large", "mistral-large"),  # no rule: unchanged
    ("meta/llama-4", "meta/llama-4"),  # already prefixed
])
def test_an_auto_prefix_provider_gets_the_sops_vendor_prefix(asked: str, sent: str) -> None:
    snap = snapshot([ROUTER], [alias("*", 3)])
    assert route(asked, snap) == ("router", sent)


def test_auto_prefix_applies_to_fixed_alias_targets_legacy_names_and_provider_prefixes() -> None:
    snap = snapshot([ROUTER, OPENAI], [alias("smart", 3, "claude-opus-4-6"), alias("claude-*", 3)])
    assert route("smart", snap) == ("router", "anthropic/claude-opus-4-6")
    assert route("claude-3-5-sonnet-20241022", snap) == ("router", "anthropic/claude-sonnet-4-5")
    assert route("router/gpt-5", snap) == ("router", "openai/gpt-5")
    assert route("openai-pool/gpt-5", snap) == ("openai-pool", "gpt-5")  # other providers are left alone


def test_an_auto_prefix_provider_serves_a_bare_name_it_lists_prefixed() -> None:
    snap = snapshot([provider(3, "router", served=("anthropic/claude-haiku-4-5",), auto_prefix=True)])
    assert route("claude-haiku-4-5", snap) == ("router", "anthropic/claude-haiku-4-5")
    assert route("anthropic/claude-haiku-4-5", snap) == ("router", "anthropic/claude-haiku-4-5")


def test_vendor_prefixed_follows_the_sop_table_only() -> None:
    assert [vendor_prefixed(m) for m in ("claude-x", "gpt-x", "gemini-x", "grok-x", "o3", "GPT-5")] == [
        "anthropic/claude-x", "openai/gpt-x", "google/gemini-x", "xai/grok-x", "o3", "GPT-5"]


def test_aliases_of_a_disabled_provider_are_ignored() -> None:
    snap = snapshot([OPENAI], [alias("claude-*", 1, priority=10), alias("*", 2)])  # provider 1 not loaded
    assert route("claude-sonnet-4-6", snap) == ("openai-pool", "claude-sonnet-4-6")


def test_an_unknown_model_is_a_model_not_found_error() -> None:
    with pytest.raises(ModelNotFound) as info:
        resolve("no-such-model", snapshot([OPENAI]))
    assert info.value.param == "model"


def key(*allowed: str) -> KeyInfo:
    return KeyInfo(id=1, name="k", allowed_models=allowed, rate_limit_per_minute=None, daily_token_limit=None)


def test_a_key_may_use_only_its_allowed_models() -> None:
    check_allowed(key(), "anything")
    check_allowed(key("gpt-*", "claude-haiku-4-5"), "gpt-5")
    check_allowed(key("gpt-*", "claude-haiku-4-5"), "claude-haiku-4-5")
    with pytest.raises(PermissionDenied):
        check_allowed(key("gpt-*", "claude-haiku-4-5"), "claude-opus-4-6")


@pytest.mark.parametrize(("pattern", "model", "matches"), [
    ("acc-*", "acc-chat-2", True),
    ("acc-*", "acc-chat/x", False),  # fnmatch's * crossed the provider/model slash
    ("acc-*", "acc-chat/x/y", False),
    ("acc-?", "acc/", False),
    ("acc[-/]x", "acc/x", False),  # a bracket never matches the slash either
    ("*", "pool-a/gpt-5", False),
    ("acc-chat/*", "acc-chat/x", True),
    ("acc-chat/*", "acc-chat/x/y", False),  # one * is one segment
    ("acc-chat/*/*", "acc-chat/anthropic/claude-sonnet-4-6", True),
    ("*/gpt-5", "pool-a/gpt-5", True),
    ("*/gpt-5", "gpt-5", False),
    ("claude-[hs]*", "claude-haiku-4-5", True),
])
def test_a_model_pattern_never_crosses_a_slash(pattern: str, model: str, matches: bool) -> None:
    assert pattern_matches(pattern, model) is matches
    assert may_use(key(pattern), model) is matches


def test_a_key_restricted_to_names_without_a_slash_cannot_reach_provider_routes() -> None:
    with pytest.raises(PermissionDenied):
        check_allowed(key("acc-*"), "acc-chat/anything-expensive")
    check_allowed(key("acc-*"), "acc-chat-2")


def test_a_vendor_prefixed_name_routes_like_its_short_name() -> None:
    snap = snapshot([ANTHROPIC, ROUTER], [alias("claude-*", 1), alias("gpt-*", 3)])
    assert route("anthropic/claude-sonnet-4-6", snap) == ("anthropic-pool", "claude-sonnet-4-6")
    assert route("openai/gpt-5", snap) == ("router", "openai/gpt-5")
    assert route("anthropic/claude-3-opus-20240229", snap) == ("anthropic-pool", "claude-opus-4-6")
    with pytest.raises(ModelNotFound):
        resolve("anthropic/gpt-5", snap)  # not a claude name: the prefix is not the SOP's


def test_a_provider_named_like_a_vendor_keeps_its_prefix_route() -> None:
    snap = snapshot([provider(4, "openai"), ROUTER], [alias("gpt-*", 3)])
    assert route("openai/gpt-5", snap) == ("openai", "gpt-5")


def test_an_unknown_or_forbidden_model_name_is_echoed_short_in_the_error() -> None:
    huge = "x" * 1_000_000
    with pytest.raises(ModelNotFound) as unknown:
        resolve(huge, snapshot([ANTHROPIC]))
    key = KeyInfo(1, "k", ("claude-*",), None, None)
    with pytest.raises(PermissionDenied) as forbidden:
        check_allowed(key, huge)
    for err in (unknown.value, forbidden.value):
        assert "x" * 200 + "…" in err.message and len(err.message) < 400


def test_a_configurations_routes_are_remembered_and_bounded_never_crossing_configurations() -> None:
    snap = snapshot([ANTHROPIC, OPENAI], [alias("claude-*", 1), alias("gpt-*", 2)])
    assert route("claude-x", snap) == ("anthropic-pool", "claude-x")
    with pytest.raises(ModelNotFound):
        resolve("nobody-serves-this", snap)
    with pytest.raises(ModelNotFound):  # a name that routes nowhere stays refused when asked again
        resolve("nobody-serves-this", snap)
    # A new configuration (the alias moved) routes afresh: what one copy learnt is never another's.
    moved = snapshot([ANTHROPIC, OPENAI], [alias("claude-*", 2), alias("gpt-*", 2)])
    assert route("claude-x", moved) == ("openai-pool", "claude-x")
    assert route("claude-x", snap) == ("anthropic-pool", "claude-x")
    # Any number of names asked for: the memory stays within its bound.
    from gateway.exchange import routing
    for i in range(routing.ROUTES_HELD + 10):
        resolve(f"gpt-{i}", snap)
    assert len(snap.routes) <= routing.ROUTES_HELD
    assert route("gpt-3", snap) == ("openai-pool", "gpt-3")
