"""Discovery and the device flow against a real gateway, step by step as Claude Code takes them
(the reference's "Flow": metadata, device authorization, the developer's approval, token polls)."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import httpx
import pytest
from django.utils import timezone

from signin.codes import USER_CODE_ALPHABET
from signin.models import DeviceAuthorization, SignIn
from tests.servers import Server
from tests.signin import web
from tests.signin.conftest import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)


def test_discovery_names_same_origin_endpoints_and_revocation(gateway: Server) -> None:
    resp = httpx.get(gateway.url + "/.well-known/oauth-authorization-server", headers=web.UA)
    assert resp.status_code == 200 and resp.headers["content-type"] == "application/json"
    meta = resp.json()
    # The client uses an endpoint only when it is an absolute URL on the base URL's origin.
    assert meta["issuer"] == gateway.url
    assert meta["device_authorization_endpoint"] == gateway.url + "/oauth/device_authorization"
    assert meta["token_endpoint"] == gateway.url + "/oauth/token"
    assert meta["revocation_endpoint"] == gateway.url + "/oauth/revoke"
    assert set(meta["grant_types_supported"]) == {web.DEVICE_GRANT, "refresh_token"}
    assert "authorization_endpoint" not in meta


def test_device_authorization_answers_codes_and_records_the_surface(gateway: Server) -> None:
    # Claude Code's whole form is surface=claude_code; a client_id, scope or anything new is ignored.
    started = web.start(gateway.url, client_id="whatever", scope="openid", future_param="x")
    code = started["user_code"]
    assert len(code) == 9 and code[4] == "-" and set(code.replace("-", "")) <= set(USER_CODE_ALPHABET)
    assert len(base64.urlsafe_b64decode(started["device_code"] + "==")) >= 32  # at least 256 bits
    assert started["verification_uri"] == gateway.url + "/device"
    assert started["verification_uri_complete"] == f"{gateway.url}/device?user_code={code}"
    assert started["expires_in"] == 600 and started["interval"] == 5
    row = DeviceAuthorization.objects.get(user_code=code.replace("-", ""))
    assert row.surface == "claude_code" and row.user_agent == "claude-code/2.1.332"
    assert started["device_code"] not in str(list(DeviceAuthorization.objects.values()))  # stored hashed


def test_an_empty_form_and_a_json_body_still_start_a_flow(gateway: Server) -> None:
    assert httpx.post(gateway.url + "/oauth/device_authorization").status_code == 200
    assert httpx.post(gateway.url + "/oauth/device_authorization", json={"surface": "x"}).status_code == 200


def test_polls_say_pending_then_slow_down_when_too_fast(gateway: Server) -> None:
    started = web.start(gateway.url)
    first = web.poll(gateway.url, started["device_code"])
    assert (first.status_code, first.json()["error"]) == (400, "authorization_pending")
    assert first.headers["cache-control"] == "no-store"
    second = web.poll(gateway.url, started["device_code"])  # at once, not 5 s later
    assert (second.status_code, second.json()["error"]) == (400, "slow_down")
    row = DeviceAuthorization.objects.get(user_code=started["user_code"].replace("-", ""))
    assert row.interval == 10  # RFC 8628 §3.5: 5 s more for this and every later poll


def test_an_approved_code_gives_tokens_once(gateway: Server, developer: Any) -> None:
    browser = web.Browser(gateway.url)
    browser.login("alice", PASSWORD)
    started = web.start(gateway.url)
    assert browser.approve(started["user_code"]).status_code == 200
    resp = web.poll(gateway.url, started["device_code"])
    assert resp.status_code == 200, resp.text
    tokens = resp.json()
    assert tokens["token_type"] == "Bearer" and tokens["expires_in"] == 3600
    assert tokens["access_token"].startswith("gw-at-") and tokens["refresh_token"].startswith("gw-rt-")
    assert tokens["email"] == "alice@example.com"  # the extension: the account that approved
    again = web.poll(gateway.url, started["device_code"])  # single use
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    (sign_in,) = SignIn.objects.all()
    assert (sign_in.user, sign_in.surface) == (developer, "claude_code")
    browser.close()


def test_a_denied_code_stops_the_client(gateway: Server, developer: Any) -> None:
    browser = web.Browser(gateway.url)
    browser.login("alice", PASSWORD)
    started = web.start(gateway.url)
    assert "Approve this sign-in?" in browser.submit(started["user_code"]).text
    denied = browser.submit(started["user_code"], "deny")
    assert denied.status_code == 200 and "Sign-in denied" in denied.text
    resp = web.poll(gateway.url, started["device_code"])
    assert (resp.status_code, resp.json()["error"]) == (400, "access_denied")
    assert not SignIn.objects.exists()
    browser.close()


def test_an_expired_code_says_expired_token_and_can_no_longer_be_approved(gateway: Server, developer: Any) -> None:
    started = web.start(gateway.url)
    # Ten minutes pass.
    DeviceAuthorization.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    resp = web.poll(gateway.url, started["device_code"])
    assert (resp.status_code, resp.json()["error"]) == (400, "expired_token")
    browser = web.Browser(gateway.url)
    browser.login("alice", PASSWORD)
    late = browser.submit(started["user_code"])
    assert late.status_code == 400 and "matches no sign-in" in late.text
    browser.close()


def test_unknown_grants_and_codes_are_oauth_errors(gateway: Server) -> None:
    unknown = web.poll(gateway.url, "not-a-code")
    assert (unknown.status_code, unknown.json()["error"]) == (400, "invalid_grant")
    missing = httpx.post(gateway.url + "/oauth/token", data={"grant_type": web.DEVICE_GRANT})
    assert missing.json()["error"] == "invalid_request"
    other = httpx.post(gateway.url + "/oauth/token", data={"grant_type": "password", "username": "a"})
    assert (other.status_code, other.json()["error"]) == (400, "unsupported_grant_type")
    assert httpx.get(gateway.url + "/oauth/token").status_code == 405
