"""What of the client's request reaches the upstream besides its body (gateway.exchange.forwarding).

Read from the scripted upstream's record of each request's headers, which never
includes credentials of its own accord: what it shows is what the gateway sent.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from accounts.config_file import load
from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, received, seen

pytestmark = pytest.mark.django_db(transaction=True)

BETAS = "interleaved-thinking-2025-05-14,context-1m-2025-08-07,fine-grained-tool-streaming-2025-05-14"


def last(mock: Server) -> dict[str, Any]:
    requests = received(mock)
    assert requests, "the upstream received nothing"
    return requests[-1]


def test_anthropic_beta_and_version_reach_an_anthropic_upstream_unchanged(pool: Any, gateway: Server,
                                                                          mock_upstream: Server) -> None:
    client = clients.anthropic_client(gateway.url, CLIENT_KEY,
                                      default_headers={"anthropic-beta": BETAS, "anthropic-version": "2023-01-01"})
    client.messages.create(model="up-anthropic/mock-text", max_tokens=20, messages=[{"role": "user", "content": "hi"}])
    sent = last(mock_upstream)
    assert sent["headers"]["anthropic-beta"] == BETAS
    assert sent["headers"]["anthropic-version"] == "2023-01-01"


def test_the_provider_version_is_used_when_the_client_sends_none(pool: Any, gateway: Server,
                                                                 mock_upstream: Server) -> None:
    httpx.post(gateway.url + "/v1/messages", headers={"x-api-key": CLIENT_KEY}, timeout=30, json={
        "model": "up-anthropic/mock-text", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]})
    sent = last(mock_upstream)
    assert sent["headers"]["anthropic-version"] == "2023-06-01"
    assert "anthropic-beta" not in sent["headers"]


def test_the_beta_query_string_reaches_an_anthropic_upstream(pool: Any, gateway: Server,
                                                             mock_upstream: Server) -> None:
    resp = httpx.post(gateway.url + "/v1/messages?beta=true", headers={"x-api-key": CLIENT_KEY}, timeout=30, json={
        "model": "up-anthropic/mock-text", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]})
    assert resp.status_code == 200
    assert last(mock_upstream)["query"] == "beta=true"


@pytest.mark.parametrize("upstream", ["openai_chat", "responses"])
def test_a_client_beta_header_is_interpreted_not_forwarded_to_another_protocol(
        pool: Any, gateway: Server, mock_upstream: Server, upstream: str) -> None:
    client = clients.anthropic_client(gateway.url, CLIENT_KEY, default_headers={"anthropic-beta": BETAS})
    client.messages.create(model=f"up-{upstream}/mock-text", max_tokens=20,
                           messages=[{"role": "user", "content": "hi"}])
    headers = last(mock_upstream)["headers"]
    assert "anthropic-beta" not in headers and "anthropic-version" not in headers


@pytest.mark.parametrize("upstream", ["openai_chat", "responses"])
def test_openai_beta_reaches_openai_protocol_upstreams(pool: Any, gateway: Server, mock_upstream: Server,
                                                       upstream: str) -> None:
    client = clients.openai_client(gateway.url, CLIENT_KEY, default_headers={"OpenAI-Beta": "responses=v1"})
    client.chat.completions.create(model=f"up-{upstream}/mock-text", messages=[{"role": "user", "content": "hi"}])
    assert last(mock_upstream)["headers"]["openai-beta"] == "responses=v1"


def test_client_credentials_and_cookies_never_reach_the_upstream(pool: Any, gateway: Server,
                                                                 mock_upstream: Server) -> None:
    resp = httpx.post(gateway.url + "/v1/messages", timeout=30, json={
        "model": "up-anthropic/mock-text", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]},
        headers={"x-api-key": CLIENT_KEY, "authorization": f"Bearer {CLIENT_KEY}", "cookie": "sessionid=abc",
                 "x-claude-code-session-id": "s-1", "proxy-authorization": "Basic eA=="})
    assert resp.status_code == 200
    sent = last(mock_upstream)
    assert sent["key_suffix"] == "ic-1"  # the account's key (sk-good-anthropic-1), not the client's
    assert CLIENT_KEY not in str(sent) and "sessionid" not in str(sent)
    assert "proxy-authorization" not in sent["headers"] and "x-claude-code-session-id" not in sent["headers"]


def test_a_provider_adds_overrides_and_drops_headers(transactional_db: Any, gateway: Server,
                                                     mock_upstream: Server) -> None:
    config = pool_config(mock_upstream, headers={"X-Org": "team-a", "anthropic-version": "2099-01-01",
                                                 "user-agent": ""})
    load(config)
    seen(gateway)
    httpx.post(mock_upstream.url + "/_mock/reset")
    client = clients.anthropic_client(gateway.url, CLIENT_KEY, default_headers={"anthropic-version": "2023-01-01"})
    client.messages.create(model="up-anthropic/mock-text", max_tokens=20, messages=[{"role": "user", "content": "hi"}])
    headers = last(mock_upstream)["headers"]
    assert headers["x-org"] == "team-a"
    assert headers["anthropic-version"] == "2099-01-01"
    assert "llm-gateway" not in headers.get("user-agent", "")
