"""Model routing through the real server: vendor auto-prefix, per-key model limits, /v1/models."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from accounts.config_file import load
from accounts.models import RequestLog
from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY
from tests.servers import Server, seen, sent_upstream

pytestmark = pytest.mark.django_db(transaction=True)

CLIENTS = ["openai_chat", "anthropic", "responses"]
MSGS = [{"role": "user", "content": "hi"}]
LIMITED_KEY = "gw-e2e-limited-key"


@pytest.fixture(autouse=True)
def settled() -> Iterator[None]:
    """Wait for this test's request-log rows: the gateway's writer must not be mid-batch when the
    test database is flushed (on PostgreSQL the two can deadlock)."""

    _calls.clear()
    yield
    deadline = time.monotonic() + 5
    while RequestLog.objects.exclude(client_key_name="seen").count() < len(_calls) and time.monotonic() < deadline:
        time.sleep(0.05)


_calls: list[str] = []


def call(gateway: Server, client_proto: str, model: str, stream: bool = False, key: str = CLIENT_KEY) -> Any:
    _calls.append(model)
    if client_proto == "openai_chat":
        return clients.chat_call(clients.openai_client(gateway.url, key), model, MSGS, stream)
    if client_proto == "anthropic":
        return clients.messages_call(clients.anthropic_client(gateway.url, key), model, MSGS, stream)
    return clients.responses_call(clients.openai_client(gateway.url, key), model, MSGS, stream)


def router_config(mock: Server, **extra: Any) -> dict[str, Any]:
    """An OpenRouter-like provider (wants ``anthropic/claude-…``) behind every claude/gpt name."""

    return {
        "providers": [{"name": "router", "protocol": "openai_chat", "base_url": f"{mock.url}/v1",
                       "auto_prefix": True, "models": [], "accounts": [{"label": "r0", "api_key": "sk-good-router"}],
                       **extra}],
        "aliases": [{"name": "claude-*", "provider": "router"}, {"name": "gpt-*", "provider": "router"},
                    {"name": "house-model", "provider": "router", "model": "claude-haiku-4-5"}],
        "client_keys": [{"name": "e2e", "key": CLIENT_KEY},
                        {"name": "limited", "key": LIMITED_KEY, "allowed_models": ["gpt-*", "house-model"]}],
    }


@pytest.mark.parametrize("client_proto", CLIENTS)
def test_an_auto_prefix_provider_receives_vendor_prefixed_names(gateway: Server, mock_upstream: Server,
                                                                client_proto: str) -> None:
    load(router_config(mock_upstream))
    seen(gateway)
    tag = uuid.uuid4().hex[:8]
    out = call(gateway, client_proto, f"claude-sonnet-4-6-{tag}", stream=client_proto == "anthropic")
    assert out.text == "Hello! This is the mock upstream."
    call(gateway, client_proto, f"gpt-5-mini-{tag}")
    assert sent_upstream(mock_upstream, tag) == [f"anthropic/claude-sonnet-4-6-{tag}", f"openai/gpt-5-mini-{tag}"]


def test_legacy_and_fixed_alias_names_are_prefixed_after_renaming(gateway: Server, mock_upstream: Server) -> None:
    load(router_config(mock_upstream))
    seen(gateway)
    httpx.post(mock_upstream.url + "/_mock/reset")
    call(gateway, "openai_chat", "claude-3-5-sonnet-20241022")
    call(gateway, "openai_chat", "house-model")
    models = sent_upstream(mock_upstream, "claude-")
    assert models[-2:] == ["anthropic/claude-sonnet-4-5", "anthropic/claude-haiku-4-5"]


def test_a_provider_without_auto_prefix_gets_the_name_as_asked(gateway: Server, mock_upstream: Server) -> None:
    config = router_config(mock_upstream)
    config["providers"][0]["auto_prefix"] = False
    load(config)
    seen(gateway)
    tag = uuid.uuid4().hex[:8]
    call(gateway, "openai_chat", f"claude-opus-4-6-{tag}")
    assert sent_upstream(mock_upstream, tag) == [f"claude-opus-4-6-{tag}"]


@pytest.mark.parametrize("client_proto", CLIENTS)
def test_a_model_outside_the_keys_allowed_list_is_refused_in_the_callers_envelope(
        gateway: Server, mock_upstream: Server, client_proto: str) -> None:
    """Anthropic's table (the Claude Code gateway protocol) makes a denied model a 400
    invalid_request_error; the OpenAI envelopes keep their 403 permission_error."""

    load(router_config(mock_upstream))
    seen(gateway)
    tag = uuid.uuid4().hex[:8]
    out = call(gateway, client_proto, f"gpt-5-{tag}", key=LIMITED_KEY)  # allowed by pattern
    assert out.text
    with pytest.raises((openai.PermissionDeniedError, anthropic.BadRequestError)) as info:
        call(gateway, client_proto, f"claude-opus-4-6-{tag}", key=LIMITED_KEY)
    body = info.value.body
    assert isinstance(body, dict)
    if client_proto == "anthropic":
        assert info.value.status_code == 400
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    else:  # the SDK hands over the "error" object of OpenAI's envelope
        assert info.value.status_code == 403
        assert body["type"] == "permission_error" and body["param"] == "model"
    assert "claude-opus-4-6" in str(body)
    assert sent_upstream(mock_upstream, tag) == [f"openai/gpt-5-{tag}"]  # the refused one never left


def test_models_list_has_upstream_models_and_exact_aliases_once_each(gateway: Server, mock_upstream: Server) -> None:
    config = router_config(mock_upstream)
    config["providers"][0]["models"] = ["mock-text", "anthropic/claude-haiku-4-5"]
    config["aliases"].append({"name": "mock-tool", "provider": "router"})  # also in the upstream's own list
    load(config)
    seen(gateway)
    page = clients.openai_client(gateway.url, CLIENT_KEY).models.list()
    ids = [m.id for m in page.data]
    assert len(ids) == len(set(ids)) and ids == sorted(ids)
    assert {"mock-text", "mock-tool", "house-model", "anthropic/claude-haiku-4-5"} <= set(ids)
    assert "router/mock-reasoning" in ids and "mock-reasoning" not in ids  # upstream's own name, routed by provider
    assert not any("*" in i for i in ids)
    assert all(m.object == "model" and m.owned_by == "router" for m in page.data)
