"""The device flow from outside, as the client and a developer's browser take it: plain HTTP to a
real gateway (the client's requests form-encoded, as Claude Code sends them; the browser's with the
session cookie and the CSRF token Django's forms want)."""

from __future__ import annotations

import re
from typing import Any

import httpx

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
UA = {"User-Agent": "claude-code/2.1.332"}


def start(base: str, **form: str) -> dict[str, Any]:
    resp = httpx.post(base + "/oauth/device_authorization", data={"surface": "claude_code", **form}, headers=UA)
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def poll(base: str, device_code: str) -> httpx.Response:
    return httpx.post(base + "/oauth/token", data={"grant_type": DEVICE_GRANT, "device_code": device_code}, headers=UA)


def refresh(base: str, refresh_token: str) -> httpx.Response:
    return httpx.post(base + "/oauth/token", data={"grant_type": "refresh_token", "refresh_token": refresh_token},
                      headers=UA)


def revoke(base: str, token: str, hint: str | None = None) -> httpx.Response:
    form = {"token": token, **({"token_type_hint": hint} if hint else {})}
    return httpx.post(base + "/oauth/revoke", data=form, headers=UA)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert found, html[:2000]
    return found.group(1)


class Browser:
    """A developer's browser on the verification page: cookies kept, redirects followed."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.http = httpx.Client(base_url=base, follow_redirects=True)

    def login(self, username: str, password: str, next_url: str = "/device") -> httpx.Response:
        page = self.http.get("/device/login", params={"next": next_url})
        return self.http.post("/device/login", data={
            "username": username, "password": password, "next": next_url, "csrfmiddlewaretoken": csrf_of(page.text)})

    def submit(self, user_code: str, decision: str | None = None) -> httpx.Response:
        page = self.http.get("/device")
        form = {"user_code": user_code, "csrfmiddlewaretoken": csrf_of(page.text)}
        if decision:
            form["decision"] = decision
        return self.http.post("/device", data=form)

    def approve(self, user_code: str) -> httpx.Response:
        confirm = self.submit(user_code)
        assert confirm.status_code == 200 and "Approve this sign-in?" in confirm.text, confirm.text
        return self.submit(user_code, "approve")

    def close(self) -> None:
        self.http.close()


def signed_in(base: str, browser: Browser) -> dict[str, Any]:
    """A whole device flow: started, approved in ``browser`` (logged in already), tokens issued."""

    started = start(base)
    done = browser.approve(started["user_code"])
    assert done.status_code == 200 and "Signed in" in done.text, done.text
    resp = poll(base, started["device_code"])
    assert resp.status_code == 200, resp.text
    tokens: dict[str, Any] = resp.json()
    return tokens
