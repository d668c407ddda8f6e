"""The dashboard in headless Chromium, as ops staff use it, against a real gateway and the scripted upstream.

A staff user logs in through the admin login page; a request made with the
official SDK appears in the open request log and changes the account's usage
numbers without a reload; an account whose key answers 429 shows up in the
disable events when the pool picks it. A screenshot is saved to
``artifacts/dashboard.png``.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from accounts.config_file import load
from accounts.models import Account, Provider, RequestLog
from tests.dashboard.conftest import PASSWORD
from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import ROOT, Server, database_url, start_gateway

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
WAIT_MS = 15_000

pytestmark = pytest.mark.django_db(transaction=True)


def chromium() -> str:
    if not os.path.exists(CHROMIUM):
        subprocess.run(["bash", str(ROOT / "tests/browser/ensure_chromium.sh")], check=False, timeout=600)
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing and tests/browser/ensure_chromium.sh could not install it")
    return CHROMIUM


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')")
    path = chromium()
    with pytest.MonkeyPatch.context() as mp:
        # Playwright's sync API keeps an asyncio loop on this thread; the tests' ORM calls are
        # still plain blocking calls, which Django would otherwise refuse next to a running loop.
        mp.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_api.sync_playwright() as p:
            b = p.chromium.launch(executable_path=path, args=ARGS)
            yield b
            b.close()


@pytest.fixture(scope="module")
def dashboard_gateway(django_db_setup: Any, django_db_blocker: Any, mock_upstream: Server) -> Iterator[Server]:
    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    # DEBUG lets WhiteNoise serve the dashboard's script and styles without a collectstatic run.
    server = start_gateway(url, {"DEBUG": "1"})
    yield server
    server.stop()


def log_in(page: Any, base: str) -> None:
    page.goto(f"{base}/admin/login/?next=/dashboard/requests/")
    page.fill("#id_username", "ops")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(r".*/dashboard/requests/$"))


def open_live(context: Any, url: str) -> Any:
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#live-status.on", timeout=WAIT_MS)
    page.evaluate("window.__notReloaded = true")
    return page


@pytest.mark.slow  # a browser, a gateway and live events: several seconds
def test_staff_watch_requests_usage_and_disable_events_arrive_live(
        browser: Any, dashboard_gateway: Server, mock_upstream: Server) -> None:
    expect = pytest.importorskip("playwright.sync_api").expect
    User.objects.create_user("ops", password=PASSWORD, is_staff=True)
    tag = uuid.uuid4().hex[:6]
    load(pool_config(mock_upstream, {"openai_chat": [f"sk-good-first-{tag}", f"sk-fail-429-second-{tag}"]}))
    httpx.post(mock_upstream.url + "/_mock/reset")
    good, limited = Account.objects.filter(provider__name="up-openai_chat").order_by("id")
    base = dashboard_gateway.url

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    console_errors: list[str] = []
    context.on("weberror", lambda e: console_errors.append(str(e.error)))
    log_in(context.new_page(), base)
    log_page = open_live(context, f"{base}/dashboard/requests/")
    usage_page = open_live(context, f"{base}/dashboard/usage/")
    overview = open_live(context, f"{base}/dashboard/")
    requests_cell = usage_page.locator(f'tr[data-account-id="{good.pk}"] [data-field="requests"]')
    assert requests_cell.inner_text() == "0"
    tiles_before = overview.locator("#t-requests").inner_text()

    # 1. A request through the gateway: a new row in the open log, new numbers on the usage page.
    sdk = clients.openai_client(base, CLIENT_KEY)
    first_model = f"up-openai_chat/mock-text-{tag}-first"
    assert clients.chat_call(sdk, first_model, [{"role": "user", "content": "hi"}], False).text
    log_page.locator("#request-rows tr", has_text=first_model).wait_for(timeout=WAIT_MS)
    # Locator assertions poll from Playwright's own world: a string predicate polled in the page
    # would be eval'd there, which the dashboard's CSP (rightly) forbids.
    expect(requests_cell).to_have_text("1", timeout=WAIT_MS)
    expect(overview.locator("#t-requests")).not_to_have_text(tiles_before, timeout=WAIT_MS)  # the tiles follow

    # 2. The next request draws the second account, whose key answers 429: it is cooled down and
    #    the request is served by the first. The event appears on the overview, the status on usage.
    second_model = f"up-openai_chat/mock-text-{tag}-second"
    assert clients.chat_call(sdk, second_model, [{"role": "user", "content": "hi"}], True).text
    event_row = overview.locator(f'#event-rows tr[data-account-id="{limited.pk}"]')
    event_row.wait_for(timeout=WAIT_MS)
    assert "429" in event_row.inner_text() and "tier3_account_exhausted" in event_row.inner_text()
    assert "Rate limit reached" in event_row.inner_text()
    expect(usage_page.locator(f'tr[data-account-id="{limited.pk}"] [data-field="status"]')).to_have_text(
        "Cooling down", timeout=WAIT_MS)
    overview.locator("#request-rows tr", has_text=second_model).wait_for(timeout=WAIT_MS)
    attempts = log_page.locator("#request-rows tr", has_text=second_model).locator("td").nth(7)
    attempts.wait_for(timeout=WAIT_MS)
    assert attempts.inner_text() == "2"

    for page in (log_page, usage_page, overview):
        assert page.evaluate("window.__notReloaded") is True  # all of it arrived without a reload
    assert console_errors == []
    artifacts = Path(ROOT / "artifacts")
    artifacts.mkdir(exist_ok=True)
    fresh = context.new_page()  # a new tab, so the window's tiles and charts include these requests
    fresh.goto(f"{base}/dashboard/?window=1h")
    fresh.wait_for_selector("#live-status.on", timeout=WAIT_MS)
    fresh.screenshot(path=str(artifacts / "dashboard.png"), full_page=True)

    # 3. The live re-enable button works from a row that arrived over the websocket.
    event_row.get_by_role("button", name="Re-enable").click()
    overview.wait_for_url(re.compile(r".*/dashboard/$"))
    limited.refresh_from_db()
    assert limited.status == Account.ACTIVE
    context.close()


def test_anonymous_browsers_get_the_login_page_and_no_websocket(browser: Any, dashboard_gateway: Server) -> None:
    page = browser.new_page()
    for path in ("/dashboard/", "/dashboard/usage/", "/dashboard/events/", "/dashboard/requests/"):
        page.goto(dashboard_gateway.url + path)
        assert "/admin/login/" in page.url
    code = page.evaluate("""() => new Promise((resolve) => {
        const ws = new WebSocket("ws://" + location.host + "/ws/dashboard/");
        ws.onclose = (e) => resolve(e.code);
        setTimeout(() => resolve("timeout"), 10000);
    })""")
    assert code == 4403


ADMIN_LISTS = {
    "/admin/accounts/account/": ["today: requests", "today: tokens", "requests", "errors", "balance", "last used"],
    "/admin/accounts/requestlog/": ["time", "model requested", "status", "input tokens", "output tokens", "cost"],
}


@pytest.mark.slow  # a browser and a gateway
def test_admin_lists_fit_1440_pixels_with_their_usage_columns(browser: Any, dashboard_gateway: Server) -> None:
    User.objects.create_user("ops", password=PASSWORD, is_staff=True, is_superuser=True)
    provider = Provider.objects.create(name="a-provider-with-a-rather-long-name", protocol="openai_chat",
                                       base_url="http://127.0.0.1:9/v1")
    for i in range(30):
        account = Account(provider=provider, label=f"team-{i}-an-account-label-as-long-as-ops-make-them",
                          balance=Decimal("123456.78901234"), requests=1_234_567, errors=98_765,
                          last_used_at=timezone.now(), status=Account.COOLING,
                          cooldown_until=timezone.now() + dt.timedelta(minutes=5))
        account.set_secret(f"sk-test-{i}-0123456789abcdef")
        account.save()
        RequestLog.objects.create(request_id=f"req_{'0' * 24}{i:04d}", client_key_name="a-client-key-name",
                                  client_protocol="openai_chat", upstream_protocol="anthropic", account=account,
                                  model_requested="claude-sonnet-4-6-20260101-with-a-long-suffix", status=200,
                                  latency_ms=12_345, input_tokens=123_456, output_tokens=65_432,
                                  cost=Decimal("0.00041234"))
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    log_in(page, dashboard_gateway.url)
    for path, columns in ADMIN_LISTS.items():
        page.goto(dashboard_gateway.url + path)
        headers = [h.strip().lower() for h in page.locator("#result_list thead th").all_inner_texts()]
        for column in columns:
            assert column in headers, (path, headers)
        # The table is whole in its box (the admin scrolls a wider one sideways) and the page is too.
        table, box = page.evaluate("[document.querySelector('#result_list').getBoundingClientRect().width,"
                                   " document.querySelector('#result_list').parentElement.clientWidth]")
        page_width = page.evaluate("document.documentElement.scrollWidth")
        assert table <= box and page_width <= 1440, (path, table, box, page_width)
    assert "$0.00041" in page.locator("#result_list").inner_text()  # the cost column, as money
    context.close()
