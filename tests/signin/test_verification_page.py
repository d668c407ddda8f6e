"""The verification page (``/device``): a developer logs in (any active Django user, not only staff),
types or confirms the code, and approves; a pre-filled code is never submitted by itself; an
address entering codes that match nothing is slowed down (RFC 8628 §5.1, §5.4)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from signin.models import DeviceAuthorization
from tests.servers import Server
from tests.signin import web
from tests.signin.conftest import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_page_wants_a_login_first_and_comes_back_with_the_code(gateway: Server, developer: Any) -> None:
    started = web.start(gateway.url)
    link = started["verification_uri_complete"]
    resp = httpx.get(link)
    assert resp.status_code == 302
    assert resp.headers["location"].startswith("/device/login?next=")
    browser = web.Browser(gateway.url)
    page = browser.login("alice", PASSWORD, next_url=link.removeprefix(gateway.url))
    assert page.status_code == 200 and str(page.url) == link
    assert f'value="{started["user_code"]}"' in page.text
    browser.close()


def test_a_prefilled_code_is_not_submitted_by_itself(gateway: Server, developer: Any) -> None:
    started = web.start(gateway.url)
    browser = web.Browser(gateway.url)
    browser.login("alice", PASSWORD)
    page = browser.http.get(started["verification_uri_complete"])
    # The code sits in the form for the developer to check and send; no script or refresh sends it.
    assert 'method="post"' in page.text and "<script" not in page.text and "http-equiv" not in page.text
    # Opening the link, even twice, decides nothing: the client still waits.
    browser.http.get(started["verification_uri_complete"])
    assert DeviceAuthorization.objects.get().status == DeviceAuthorization.PENDING
    # Sending the code shows what is being approved, and still decides nothing.
    confirm = browser.submit(started["user_code"])
    assert "claude_code" in confirm.text and "claude-code/2.1.332" in confirm.text and "alice" in confirm.text
    assert DeviceAuthorization.objects.get().status == DeviceAuthorization.PENDING
    assert web.poll(gateway.url, started["device_code"]).json()["error"] == "authorization_pending"
    browser.close()


def test_the_code_may_be_typed_in_lower_case_and_without_the_dash(gateway: Server, developer: Any) -> None:
    started = web.start(gateway.url)
    browser = web.Browser(gateway.url)
    browser.login("alice", PASSWORD)
    typed = started["user_code"].replace("-", " ").lower()
    assert browser.submit(typed, "approve").status_code == 200
    assert web.poll(gateway.url, started["device_code"]).status_code == 200
    browser.close()


def test_wrong_codes_from_one_address_are_rate_limited(gateway: Server, developer: Any) -> None:
    started = web.start(gateway.url)
    browser = web.Browser(gateway.url)
    browser.login("alice", PASSWORD)
    for i in range(10):  # GATEWAY_SIGNIN_ATTEMPTS_PER_IP
        wrong = browser.submit(f"BBBB-BBB{'BCDFGHJKLM'[i]}")
        assert wrong.status_code == 400 and "matches no sign-in" in wrong.text
    # Past the limit even the right code is refused, so a guesser learns nothing more.
    limited = browser.submit(started["user_code"], "approve")
    assert limited.status_code == 429 and "Too many codes" in limited.text
    assert web.poll(gateway.url, started["device_code"]).json()["error"] == "authorization_pending"
    browser.close()


def test_the_admin_login_form_is_not_needed_and_a_wrong_password_is_refused(gateway: Server, developer: Any) -> None:
    browser = web.Browser(gateway.url)
    refused = browser.login("alice", "wrong")
    assert "didn&#x27;t match" in refused.text or "didn't match" in refused.text
    assert browser.http.get("/device").url.path == "/device/login"
    browser.close()


def test_a_post_without_the_csrf_token_is_refused(gateway: Server, developer: Any) -> None:
    started = web.start(gateway.url)
    browser = web.Browser(gateway.url)
    browser.login("alice", PASSWORD)
    forged = browser.http.post("/device", data={"user_code": started["user_code"], "decision": "approve"})
    assert forged.status_code == 403
    assert DeviceAuthorization.objects.get().status == DeviceAuthorization.PENDING
    browser.close()
