"""The admin's "test" probe: one minimal request through an account, on every upstream protocol."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from accounts.models import Account, ModelAlias, Provider
from accounts.probe import probe_model, send_probe
from gateway.mockupstream.server import ServerThread

pytestmark = pytest.mark.django_db

PROTOCOLS = ["openai_chat", "anthropic", "responses"]


@pytest.fixture(scope="module")
def upstream() -> Iterator[ServerThread]:
    with ServerThread() as server:
        yield server


def account(upstream: ServerThread, protocol: str, key: str) -> Account:
    provider = Provider.objects.create(name=f"p-{protocol}", protocol=protocol, base_url=upstream.url + "/v1",
                                       served_models=["mock-text"])
    acc = Account(provider=provider, label="a")
    acc.set_secret(key)
    acc.save()
    return acc


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_good_account_answers_ok_on_every_protocol(upstream: ServerThread, protocol: str) -> None:
    outcome = send_probe(account(upstream, protocol, "sk-probe-good-1234"), "mock-text", timeout=5)
    assert (outcome.ok, outcome.status, outcome.summary) == (True, 200, "OK")
    assert upstream.state.recent[-1]["body"]["model"] == "mock-text"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_failing_account_is_reported_with_its_tier_and_without_its_key(upstream: ServerThread,
                                                                         protocol: str) -> None:
    outcome = send_probe(account(upstream, protocol, "sk-fail-402-abcdef"), "mock-text", timeout=5)
    assert not outcome.ok and outcome.status == 402
    assert outcome.summary.startswith("HTTP 402 (tier3_account_exhausted): ")
    assert "sk-fail-402-abcdef" not in outcome.summary


def test_the_probe_model_is_one_the_provider_really_serves(upstream: ServerThread) -> None:
    provider = Provider.objects.create(name="p", protocol="openai_chat", base_url=upstream.url + "/v1")
    assert probe_model(provider) == "probe"
    ModelAlias.objects.create(name="claude-*", provider=provider, upstream_model="*")
    ModelAlias.objects.create(name="fast", provider=provider, upstream_model="gpt-5-mini")
    assert probe_model(provider) == "gpt-5-mini"
    provider.served_models = ["mock-text"]
    assert probe_model(provider) == "mock-text"
