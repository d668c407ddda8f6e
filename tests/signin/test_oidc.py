"""The verification page's company login: a gateway configured with an OpenID Connect provider (the
scripted one on loopback, ``tests.signin.idp``) sends the developer there, checks the RS256 ID token
against the provider's JWKS, makes or finds the Django user, and maps the provider's groups to a team;
the bearer the device flow then issues acts as that developer in that team."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from accounts.models import ApiKey, RequestLog, Team
from signin.models import Identity
from tests.servers import Server, own_gateway
from tests.signin import web
from tests.signin.idp import CLIENT_ID, CLIENT_SECRET, IdP

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def idp() -> Iterator[IdP]:
    provider = IdP().start()
    yield provider
    provider.stop()


@pytest.fixture(scope="module")
def oidc_gateway(django_db_setup: Any, django_db_blocker: Any, idp: IdP) -> Iterator[Server]:
    env = {"GATEWAY_OIDC_ISSUER": idp.issuer, "GATEWAY_OIDC_CLIENT_ID": CLIENT_ID,
           "GATEWAY_OIDC_CLIENT_SECRET": CLIENT_SECRET, "GATEWAY_OIDC_NAME": "Corp SSO"}
    with own_gateway(django_db_blocker, env) as server:
        yield server


def company_login(gateway: Server, next_url: str) -> tuple[web.Browser, httpx.Response]:
    browser = web.Browser(gateway.url)
    page = browser.http.get("/device/login", params={"next": next_url})
    assert "Sign in with Corp SSO" in page.text
    # The button: to the provider and back (its /authorize signs the scripted person in at once).
    landed = browser.http.get("/oidc/login", params={"next": next_url})
    return browser, landed


def test_a_developer_signs_in_through_the_company_idp_and_their_group_picks_the_team(
        pool: Any, oidc_gateway: Server, idp: IdP) -> None:
    platform = Team.objects.create(name="platform", idp_group="eng-platform")
    Team.objects.create(name="sales", idp_group="sales")
    started = web.start(oidc_gateway.url)
    link = started["verification_uri_complete"].removeprefix(oidc_gateway.url)
    browser, landed = company_login(oidc_gateway, link)
    # Back on the verification page, logged in as the provider's person, the code filled in, not sent.
    assert landed.status_code == 200 and landed.url.path == "/device", landed.text
    assert "bob" in landed.text and f'value="{started["user_code"]}"' in landed.text
    assert idp.token_requests == 1

    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(email="bob@corp.example")
    assert Identity.objects.filter(user=user, issuer=idp.issuer, subject="u-1001").exists()
    assert not user.has_usable_password() and not user.is_staff
    done = browser.approve(started["user_code"])
    assert "Signed in" in done.text
    tokens = web.poll(oidc_gateway.url, started["device_code"]).json()
    assert tokens["email"] == "bob@corp.example"
    assert ApiKey.objects.get(user=user).team == platform

    model = f"up-anthropic/mock-text-{uuid.uuid4().hex[:8]}"
    resp = httpx.post(oidc_gateway.url + "/v1/messages", headers={"Authorization": f"Bearer {tokens['access_token']}"},
                      json={"model": model, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})
    assert resp.status_code == 200, resp.text
    deadline = time.monotonic() + 10
    while not RequestLog.objects.filter(model_requested=model).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    row = RequestLog.objects.get(model_requested=model)
    assert (row.user, row.team, row.surface) == (user, platform, "claude_code")
    browser.close()


def test_the_same_person_is_found_again_and_a_group_change_moves_their_team(
        pool: Any, oidc_gateway: Server, idp: IdP) -> None:
    Team.objects.create(name="platform", idp_group="eng-platform")
    data = Team.objects.create(name="data", idp_group="eng-data")
    browser, _ = company_login(oidc_gateway, "/device")
    browser.close()
    idp.person.groups = ["eng-data", "unrelated"]
    try:
        browser, landed = company_login(oidc_gateway, "/device")
        assert landed.url.path == "/device"
        browser.close()
    finally:
        idp.person.groups = ["eng-platform"]
    from django.contrib.auth import get_user_model

    (user,) = get_user_model().objects.filter(email="bob@corp.example")  # one user, found by (issuer, sub)
    assert ApiKey.objects.get(user=user).team == data


def test_an_existing_account_with_the_same_email_is_used_and_a_deactivated_one_refused(
        pool: Any, oidc_gateway: Server, idp: IdP) -> None:
    from django.contrib.auth import get_user_model

    existing = get_user_model().objects.create_user("robert", "BOB@corp.example", "pw")
    existing.is_active = False
    existing.save()
    browser, landed = company_login(oidc_gateway, "/device")
    assert landed.status_code == 403 and "deactivated" in landed.text
    assert Identity.objects.get().user == existing
    browser.close()


def test_a_forged_callback_is_refused(pool: Any, oidc_gateway: Server) -> None:
    browser = web.Browser(oidc_gateway.url)
    resp = browser.http.get("/oidc/callback", params={"code": "stolen", "state": "made-up"})
    assert resp.status_code == 400 and "Sign-in failed" in resp.text
    assert browser.http.get("/device").url.path == "/device/login"
    browser.close()
