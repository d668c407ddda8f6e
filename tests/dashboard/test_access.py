"""Only staff see the dashboard: pages, the re-enable form and the websocket."""

from __future__ import annotations

import re
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from accounts import pool
from accounts.models import DisableEvent
from gateway.asgi import application
from tests.dashboard.conftest import make_account, make_key, record, write

pytestmark = pytest.mark.django_db


@pytest.fixture
def urls(provider: Any) -> list[tuple[str, str]]:
    account = make_account(provider, "a")
    rec = record(account)
    write([rec])
    pool.disable_account(account.pk, rule="r", tier="t", status_code=429, excerpt="x")
    event = DisableEvent.objects.get()
    return [
        ("get", reverse("dashboard:overview")), ("get", reverse("dashboard:usage")),
        ("get", reverse("dashboard:account", args=[account.pk])), ("get", reverse("dashboard:events")),
        ("get", reverse("dashboard:requests")), ("get", reverse("dashboard:request", args=[rec.request_id])),
        ("post", reverse("dashboard:enable", args=[event.pk])), ("get", reverse("dashboard:enable", args=[event.pk])),
        *(("post", reverse(f"dashboard:account_{action}", args=[account.pk])) for action in ("enable", "disable", "test")),
        ("get", reverse("dashboard:keys")), ("get", reverse("dashboard:key", args=[make_key().pk])),
        ("get", reverse("dashboard:spend")), ("get", reverse("dashboard:spend_csv")),
        ("get", reverse("dashboard:requests_csv")),
    ]


def test_anonymous_visitors_are_sent_to_the_login_page_from_every_url(client: Client, urls: Any) -> None:
    for method, url in urls:
        response = getattr(client, method)(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/admin/login/?next="), url
    assert DisableEvent.objects.get().ended_at is None  # the anonymous POST changed nothing


def test_logged_in_users_who_are_not_staff_are_refused(client: Client, urls: Any) -> None:
    client.force_login(User.objects.create_user("someone"))
    for method, url in urls:
        assert getattr(client, method)(url).status_code == 302, url


def test_staff_pages_carry_the_security_headers(staff_client: Client, urls: Any) -> None:
    for method, url in urls:
        if method != "get" or "enable" in url:
            continue
        response = staff_client.get(url)
        assert response.status_code == 200, url
        csp = response["Content-Security-Policy"]
        assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert "unsafe-inline" not in csp and "http" not in csp
        assert response["X-Frame-Options"] == "DENY"
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Referrer-Policy"] == "same-origin"


def test_pages_load_nothing_from_another_origin(staff_client: Client, urls: Any) -> None:
    for method, url in urls:
        if method != "get" or "enable" in url or url.endswith(".csv"):  # downloads, not pages
            continue
        html = staff_client.get(url).content.decode()
        links = re.findall(r'(?:src|href|action)="([^"]*)"', html)
        assert links and all(link.startswith(("/", "?", "#")) or link == "" for link in links), url
        assert "<script>" not in html and " style=" not in html, url  # nothing inline for the CSP to block


def test_re_enabling_needs_the_csrf_token(staff: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff)
    account = make_account_for_csrf()
    pool.disable_account(account.pk, rule="r", tier="t", status_code=401, excerpt="bad key")
    event = DisableEvent.objects.get()
    url = reverse("dashboard:enable", args=[event.pk])
    assert client.post(url).status_code == 403
    page = client.get(reverse("dashboard:events")).content.decode()
    token = page.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
    assert client.post(url, {"csrfmiddlewaretoken": token}).status_code == 302
    event.refresh_from_db()
    assert event.ended_by == "hand"


def make_account_for_csrf() -> Any:
    from accounts.models import Provider

    provider = Provider.objects.create(name="csrf", protocol="anthropic", base_url="http://127.0.0.1:9/v1")
    return make_account(provider, "only")


def ws_connect(cookie: str | None) -> tuple[bool, int | None]:
    headers = [(b"origin", b"http://127.0.0.1")]
    if cookie:
        headers.append((b"cookie", f"sessionid={cookie}".encode()))

    async def go() -> tuple[bool, int | None]:
        """(joined the live feed, close code)."""

        comm = WebsocketCommunicator(application, "/ws/dashboard/", headers=headers)
        connected, code = await comm.connect()
        if not connected:
            return False, code
        first = await comm.receive_output()
        await comm.disconnect()
        if first["type"] == "websocket.close":
            return False, first.get("code")
        return first == {"type": "websocket.send", "text": '{"kind": "hello"}'}, None

    return async_to_sync(go)()


@pytest.mark.django_db(transaction=True)
def test_the_websocket_refuses_anonymous_and_non_staff_users() -> None:
    assert ws_connect(None) == (False, 4403)
    user = User.objects.create_user("someone")
    client = Client()
    client.force_login(user)
    assert ws_connect(client.cookies["sessionid"].value) == (False, 4403)
    user.is_staff = True
    user.save()
    assert ws_connect(client.cookies["sessionid"].value)[0] is True


@pytest.mark.django_db(transaction=True)
def test_the_websocket_refuses_pages_of_other_origins(staff_client: Client) -> None:
    async def go() -> bool:
        comm = WebsocketCommunicator(application, "/ws/dashboard/", headers=[
            (b"origin", b"http://evil.example"), (b"cookie", f"sessionid={staff_client.cookies['sessionid'].value}".encode())])
        connected, _ = await comm.connect()
        await comm.disconnect()
        return connected

    assert async_to_sync(go)() is False
