"""A signed-in developer's tokens through a real gateway and the official Anthropic SDK: the bearer
works on every endpoint and acts as the developer's own key (its team, its request-log rows); refresh
rotates the pair; revocation (RFC 7009) and deactivating the developer end the sign-in at the next
request, with ``x-should-retry: false`` so the client asks for a new login at once."""

from __future__ import annotations

import time
import uuid
from typing import Any

import anthropic
import httpx
import pytest

from accounts.models import ApiKey, RequestLog, Team
from signin.models import SignIn, Token
from tests.servers import Server
from tests.signin import web
from tests.signin.conftest import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "up-anthropic/mock-text"


@pytest.fixture
def browser(gateway: Server, developer: Any) -> Any:
    b = web.Browser(gateway.url)
    b.login("alice", PASSWORD)
    yield b
    b.close()


def ask(url: str, bearer: str, model: str = MODEL, **headers: str) -> Any:
    # The bearer alone (Authorization: Bearer), as Claude Code sends it signed in.
    client = anthropic.Anthropic(base_url=url, auth_token=bearer, max_retries=0, timeout=30, default_headers=headers)
    return client.messages.create(model=model, max_tokens=20, messages=[{"role": "user", "content": "hi"}])


def raw_ask(url: str, bearer: str) -> httpx.Response:
    return httpx.post(url + "/v1/messages", headers={"Authorization": f"Bearer {bearer}"},
                      json={"model": MODEL, "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]})


def log_row(model: str, timeout: float = 10.0) -> RequestLog:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = RequestLog.objects.select_related("user", "team", "client_key").filter(model_requested=model).first()
        if row is not None:
            return row
        time.sleep(0.05)
    raise AssertionError(f"no request-log row for {model}")


def test_the_bearer_acts_as_the_developers_own_key_and_the_log_names_them(
        pool: Any, gateway: Server, browser: Any, developer: Any) -> None:
    tokens = web.signed_in(gateway.url, browser)
    # The first sign-in made the developer's key; ops put it in a team.
    key = ApiKey.objects.get(user=developer)
    team = Team.objects.create(name="platform")
    key.team = team
    key.save()
    model = f"{MODEL}-{uuid.uuid4().hex[:8]}"
    answer = ask(gateway.url, tokens["access_token"], model)
    assert answer.content[0].type == "text"
    row = log_row(model)
    assert (row.user, row.team, row.surface, row.client_key) == (developer, team, "claude_code", key)
    assert row.status == 200
    # The same bearer works on the other bearer-authenticated endpoints.
    count = httpx.post(gateway.url + "/v1/messages/count_tokens", headers={
        "Authorization": f"Bearer {tokens['access_token']}"},
        json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
    assert count.status_code == 200 and count.json()["input_tokens"] > 0
    listed = httpx.get(gateway.url + "/v1/models", headers={"Authorization": f"Bearer {tokens['access_token']}",
                                                           "anthropic-version": "2023-06-01"})
    assert listed.status_code == 200


def test_refresh_rotates_the_pair_and_each_refresh_token_works_once(
        pool: Any, gateway: Server, browser: Any) -> None:
    tokens = web.signed_in(gateway.url, browser)
    resp = web.refresh(gateway.url, tokens["refresh_token"])
    assert resp.status_code == 200, resp.text
    fresh = resp.json()
    assert set(fresh) >= {"access_token", "token_type", "expires_in", "refresh_token"}
    assert fresh["access_token"] != tokens["access_token"] and fresh["refresh_token"] != tokens["refresh_token"]
    assert ask(gateway.url, fresh["access_token"]).content
    # The used refresh token is spent: presenting it again forces a new login.
    again = web.refresh(gateway.url, tokens["refresh_token"])
    assert (again.status_code, again.json()["error"]) == (401, "invalid_grant")
    # One sign-in throughout, refreshed.
    (sign_in,) = SignIn.objects.all()
    assert sign_in.refreshed_at is not None


def test_revoking_the_bearer_ends_the_sign_in_at_the_next_request(
        pool: Any, gateway: Server, browser: Any) -> None:
    tokens = web.signed_in(gateway.url, browser)
    assert raw_ask(gateway.url, tokens["access_token"]).status_code == 200
    # Sign-out as Claude Code does it: the bearer, then the refresh token with its hint.
    assert web.revoke(gateway.url, tokens["access_token"]).status_code == 200
    assert web.revoke(gateway.url, tokens["refresh_token"], "refresh_token").status_code == 200
    refused = raw_ask(gateway.url, tokens["access_token"])
    assert refused.status_code == 401 and refused.headers["x-should-retry"] == "false"
    assert refused.json() == {"type": "error", "error": {
        "type": "authentication_error", "message": "This sign-in was revoked: sign in to the gateway again (/login)"}}
    assert web.refresh(gateway.url, tokens["refresh_token"]).json()["error"] == "invalid_grant"
    # The SDK surfaces it as an authentication error, without retrying.
    with pytest.raises(anthropic.AuthenticationError):
        ask(gateway.url, tokens["access_token"])


def test_revocation_of_an_unknown_token_is_still_200_and_a_missing_one_a_400(gateway: Server) -> None:
    assert web.revoke(gateway.url, "gw-at-never-issued").status_code == 200
    missing = httpx.post(gateway.url + "/oauth/revoke", data={})
    assert (missing.status_code, missing.json()["error"]) == (400, "invalid_request")


def test_deactivating_the_developer_ends_bearer_and_refresh(
        pool: Any, gateway: Server, browser: Any, developer: Any) -> None:
    tokens = web.signed_in(gateway.url, browser)
    assert raw_ask(gateway.url, tokens["access_token"]).status_code == 200
    developer.is_active = False  # ops untick "active" in the admin
    developer.save()
    refused = raw_ask(gateway.url, tokens["access_token"])
    assert refused.status_code == 401 and refused.headers["x-should-retry"] == "false"
    assert "deactivated" in refused.json()["error"]["message"]
    resp = web.refresh(gateway.url, tokens["refresh_token"])
    assert (resp.status_code, resp.json()["error"]) == (401, "invalid_grant")


def test_disabling_the_developers_key_ends_the_sign_in_too(
        pool: Any, gateway: Server, browser: Any, developer: Any) -> None:
    tokens = web.signed_in(gateway.url, browser)
    ApiKey.objects.filter(user=developer).update(active=False)
    refused = raw_ask(gateway.url, tokens["access_token"])
    assert refused.status_code == 401 and refused.headers["x-should-retry"] == "false"
    assert web.refresh(gateway.url, tokens["refresh_token"]).status_code == 401


def test_an_expired_bearer_is_refused_but_its_refresh_token_still_works(
        pool: Any, gateway: Server, browser: Any) -> None:
    from django.utils import timezone

    tokens = web.signed_in(gateway.url, browser)
    Token.objects.filter(kind=Token.ACCESS).update(expires_at=timezone.now())
    refused = raw_ask(gateway.url, tokens["access_token"])
    assert refused.status_code == 401 and refused.headers["x-should-retry"] == "false"
    assert "expired" in refused.json()["error"]["message"]
    fresh = web.refresh(gateway.url, tokens["refresh_token"]).json()
    assert raw_ask(gateway.url, fresh["access_token"]).status_code == 200


def test_tokens_are_stored_hashed(pool: Any, gateway: Server, browser: Any) -> None:
    tokens = web.signed_in(gateway.url, browser)
    stored = str(list(Token.objects.values()))
    assert tokens["access_token"] not in stored and tokens["refresh_token"] not in stored
    assert Token.objects.count() == 2
