"""Attribution from outside: an account that failed and was passed over is found by the request log's
account filter (dashboard and admin) and its page lists the failed attempt; a request refused for a
deactivated key is listed under that key's name."""

from __future__ import annotations

import re
import time
import uuid
from datetime import datetime
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from accounts.config_file import load
from accounts.models import Account, RequestAttempt, RequestLog
from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, seen

pytestmark = pytest.mark.django_db(transaction=True)


def staff_browser(gateway: Server) -> httpx.Client:
    user = User.objects.create_user(f"ops-{uuid.uuid4().hex[:6]}", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(user)
    return httpx.Client(base_url=gateway.url, cookies={"sessionid": client.cookies["sessionid"].value}, timeout=20)


@pytest.fixture
def since() -> datetime:
    """When the test began: the log is written behind the answers, so the last rows of the test
    before (which shares the gateway) may arrive after that test's tables were emptied."""

    return timezone.now()


def logged(request_count: int, since: datetime) -> list[RequestLog]:
    rows = RequestLog.objects.exclude(client_key_name="seen").filter(created_at__gte=since)
    deadline = time.monotonic() + 10
    while (n := rows.count()) < request_count:
        assert time.monotonic() < deadline, f"{n} of {request_count} requests logged"
        time.sleep(0.05)
    return list(rows.order_by("id"))


def test_an_account_passed_over_is_found_by_the_account_filter_and_lists_its_failed_attempt(
        gateway: Server, mock_upstream: Server, since: datetime) -> None:
    # a0 is rate limited (the request moves on), a1 answers.
    load(pool_config(mock_upstream, {"openai_chat": [f"sk-fail-429-{uuid.uuid4().hex[:6]}", "sk-good-chat-1"]}))
    seen(gateway)
    httpx.post(mock_upstream.url + "/_mock/reset")
    answer = clients.openai_client(gateway.url, CLIENT_KEY).chat.completions.create(
        model="up-openai_chat/mock-text", messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content
    [row] = logged(1, since)
    failed, answered = (Account.objects.get(provider__name="up-openai_chat", label=label) for label in ("a0", "a1"))
    assert row.account_id == answered.pk and row.status == 200  # a0 is only in the trace
    with staff_browser(gateway) as browser:
        for account in (failed, answered):
            page = browser.get("/dashboard/requests/", params={"account": account.pk}).text
            assert re.findall(r'data-request-id="([^"]+)"', page) == [row.request_id], account.label
            admin = browser.get("/admin/accounts/requestlog/", params={"attempted_account": account.pk}).text
            assert row.request_id[:12] in admin and "0 request logs" not in admin, account.label
        other = browser.get("/dashboard/requests/", params={"account": Account.objects.get(
            provider__name="up-anthropic").pk}).text
        assert "No requests." in other
        account_page = browser.get(f"/dashboard/accounts/{failed.pk}/").text
    failures = account_page[account_page.index('id="failed-attempts"'):]
    assert row.request_id in failures and "429" in failures and "answered by" in failures
    first, last = RequestAttempt.objects.filter(request=row).order_by("id")
    assert (first.account_id, last.account_id, last.verdict) == (failed.pk, answered.pk, "ok")
    assert first.verdict in ("retry", "disable")  # passed over (a 429 with a Retry-After cools it down)
    assert first.get_verdict_display() in failures


def test_the_request_log_names_a_deactivated_key_that_was_refused(gateway: Server, mock_upstream: Server,
                                                                  since: datetime) -> None:
    revoked = f"gw-revoked-{uuid.uuid4().hex}"
    load({**pool_config(mock_upstream), "client_keys": [{"name": "former-intern", "key": revoked, "active": False}]})
    seen(gateway)
    assert httpx.post(gateway.url + "/v1/chat/completions", headers={"Authorization": f"Bearer {revoked}"},
                      json={"model": "up-openai_chat/mock-text", "messages": []}).status_code == 401
    [row] = logged(1, since)
    with staff_browser(gateway) as browser:
        page = browser.get("/dashboard/requests/").text
    shown = page[page.index(f'data-request-id="{row.request_id}"'):]
    shown = shown[:shown.index("</tr>")]
    assert "former-intern" in shown and revoked not in page
