"""Model discovery through the real server, read by each official SDK and by Codex CLI's exact request."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import openai
import pytest

from accounts.config_file import load
from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY
from tests.servers import Server, seen

pytestmark = pytest.mark.django_db(transaction=True)

LIMITED_KEY = "gw-e2e-models-limited"
SONNET = {"display_name": "Claude Sonnet (house)", "created_at": "2025-09-29T00:00:00Z", "context_window": 200000,
          "max_output_tokens": 64000}
CODER = {"base_instructions": "You are the house coding agent.", "context_window": 128000,
         "supported_reasoning_levels": ["low", "medium", "high"], "default_reasoning_level": "medium",
         "supports_reasoning_summaries": True}
# What Codex CLI 0.169.0 sends for its catalog when its provider has model_catalog_url (captured at a listener).
CODEX_HEADERS = {"originator": "codex_exec", "accept": "*/*",
                 "user-agent": "codex_exec/0.169.0 (Debian 12.0.0; x86_64) xterm (codex_exec; 0.169.0)"}


@pytest.fixture
def catalog(transactional_db: Any, mock_upstream: Server, gateway: Server) -> None:
    """Two providers on the scripted upstream; aliases with and without metadata; a key limited to two names."""

    load({
        "providers": [{"name": f"cat-{p}", "protocol": p, "base_url": f"{mock_upstream.url}/v1",
                       "models": ["house-model"] if p == "openai_chat" else [],
                       "accounts": [{"label": "c0", "api_key": f"sk-good-cat-{p}"}]} for p in ("openai_chat", "anthropic")],
        "aliases": [{"name": "sonnet-house", "provider": "cat-anthropic", "model": "mock-text", "metadata": SONNET},
                    {"name": "coder", "provider": "cat-openai_chat", "model": "mock-text", "metadata": CODER},
                    {"name": "fast", "provider": "cat-openai_chat", "model": "mock-text"},
                    {"name": "claude-*", "provider": "cat-anthropic"}],
        "client_keys": [{"name": "e2e", "key": CLIENT_KEY},
                        {"name": "models-limited", "key": LIMITED_KEY, "allowed_models": ["coder", "sonnet-*"]}],
    })
    seen(gateway)


def test_the_anthropic_sdk_pages_through_every_model_and_retrieves_one(catalog: None, gateway: Server) -> None:
    client = clients.anthropic_client(gateway.url, CLIENT_KEY)
    first = client.models.list(limit=2)
    assert len(first.data) == 2 and first.has_more
    listed = [m.id for m in client.models.list(limit=2)]  # iterating fetches page after page
    assert len(listed) == len(set(listed)) > 2 and listed == sorted(listed)
    assert {"sonnet-house", "coder", "fast", "house-model"} <= set(listed) and "claude-*" not in listed
    # the upstreams' own names that route nowhere as they are come as provider routes
    assert "cat-openai_chat/mock-tool" in listed and "mock-tool" not in listed
    one = client.models.retrieve("sonnet-house")
    assert one.type == "model" and one.id == "sonnet-house" and one.display_name == SONNET["display_name"]
    assert one.created_at.isoformat().startswith("2025-09-29") and one.max_input_tokens == 200000
    assert one.max_tokens == 64000
    assert client.models.retrieve("cat-openai_chat/mock-tool").id == "cat-openai_chat/mock-tool"  # a slash in the id


def test_the_openai_sdk_lists_and_retrieves_in_openai_objects(catalog: None, gateway: Server) -> None:
    client = clients.openai_client(gateway.url, CLIENT_KEY)
    models = {m.id: m for m in client.models.list()}
    assert {"sonnet-house", "coder", "fast", "house-model"} <= set(models)
    assert models["coder"].owned_by == "cat-openai_chat" and models["sonnet-house"].owned_by == "cat-anthropic"
    assert models["sonnet-house"].created == 1759104000  # 2025-09-29T00:00:00Z
    one = client.models.retrieve("fast")
    assert (one.id, one.object, one.owned_by) == ("fast", "model", "cat-openai_chat")
    # a name a glob alias routes is there to retrieve, though no listing can name every one
    assert client.models.retrieve("claude-opus-4-6").owned_by == "cat-anthropic"


@pytest.mark.parametrize("protocol", ["anthropic", "openai"])
def test_a_restricted_key_sees_only_its_models(catalog: None, gateway: Server, protocol: str) -> None:
    if protocol == "anthropic":
        client: Any = clients.anthropic_client(gateway.url, LIMITED_KEY)
        listed = [m.id for m in client.models.list()]
        refused: type[Exception] = anthropic.NotFoundError
    else:
        client = clients.openai_client(gateway.url, LIMITED_KEY)
        listed = [m.id for m in client.models.list()]
        refused = openai.NotFoundError
    assert listed == ["coder", "sonnet-house"]
    assert client.models.retrieve("coder").id == "coder"
    with pytest.raises(refused):
        client.models.retrieve("fast")  # routes, but not for this key


def test_an_unknown_model_is_a_404_in_the_anthropic_envelope(catalog: None, gateway: Server) -> None:
    with pytest.raises(anthropic.NotFoundError) as info:
        clients.anthropic_client(gateway.url, CLIENT_KEY).models.retrieve("no-such-model")
    body = info.value.body
    assert info.value.status_code == 404 and isinstance(body, dict)
    assert body["type"] == "error" and body["error"]["type"] == "not_found_error"
    assert "no-such-model" in body["error"]["message"]


def test_an_unknown_model_is_a_404_in_the_openai_envelope(catalog: None, gateway: Server) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        clients.openai_client(gateway.url, CLIENT_KEY).models.retrieve("no-such-model")
    body = info.value.body  # the SDK hands over the "error" object of OpenAI's envelope
    assert info.value.status_code == 404 and isinstance(body, dict) and "no-such-model" in body["message"]
    raw = httpx.get(gateway.url + "/v1/models/no-such-model", headers={"authorization": f"Bearer {CLIENT_KEY}"})
    assert raw.status_code == 404 and set(raw.json()) == {"error"}


def test_x_api_key_and_bearer_both_authenticate_the_listing(catalog: None, gateway: Server) -> None:
    by_header = httpx.get(gateway.url + "/v1/models", headers={"x-api-key": CLIENT_KEY})
    by_bearer = httpx.get(gateway.url + "/v1/models", headers={"authorization": f"Bearer {CLIENT_KEY}"})
    assert by_header.status_code == by_bearer.status_code == 200
    assert by_header.json()["data"][0]["type"] == "model" and by_bearer.json()["object"] == "list"
    wrong = httpx.get(gateway.url + "/v1/models", headers={"x-api-key": "gw-wrong", "anthropic-version": "2023-06-01"})
    assert wrong.status_code == 401 and wrong.json()["error"]["type"] == "authentication_error"


def test_a_bad_page_size_is_a_400_in_the_anthropic_envelope(catalog: None, gateway: Server) -> None:
    resp = httpx.get(gateway.url + "/v1/models", params={"limit": "5000"},
                     headers={"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"})
    assert resp.status_code == 400
    assert resp.json()["type"] == "error" and resp.json()["error"]["type"] == "invalid_request_error"


def test_codex_catalog_request_gets_model_info_for_models_with_instructions(catalog: None, gateway: Server) -> None:
    resp = httpx.get(gateway.url + "/v1/models?client_version=0.169.0",
                     headers={**CODEX_HEADERS, "authorization": f"Bearer {CLIENT_KEY}"})
    assert resp.status_code == 200
    models = resp.json()["models"]
    assert [m["slug"] for m in models] == ["coder"]  # the others would lose Codex's own instructions
    coder = models[0]
    assert coder["base_instructions"] == CODER["base_instructions"] and coder["context_window"] == 128000
    assert [lvl["effort"] for lvl in coder["supported_reasoning_levels"]] == ["low", "medium", "high"]
    assert coder["default_reasoning_level"] == "medium" and coder["supports_reasoning_summaries"] is True
    assert coder["visibility"] == "list" and coder["truncation_policy"]["mode"] in ("bytes", "tokens")
    limited = httpx.get(gateway.url + "/v1/models?client_version=0.169.0",
                        headers={**CODEX_HEADERS, "authorization": f"Bearer {LIMITED_KEY}"})
    assert [m["slug"] for m in limited.json()["models"]] == ["coder"]
