"""An ops engineer's round in headless Chromium, against a real gateway and the scripted upstream.

The tasks of a day with a pool that has bad accounts: find the failing account and why, watch a
cool-down end and a disabled account come back by itself (no click, no reload), see what a client
key spent, and export the request log as CSV. Each step leaves a screenshot under
``artifacts/walkthrough/`` for a person to look at.
"""

from __future__ import annotations

import csv
import io
import re
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User

from accounts.config_file import load
from accounts.models import Account, ApiKey, RequestLog
from accounts.rules import DEFAULT_RULES
from tests.dashboard.conftest import PASSWORD
from tests.dashboard.test_browser import WAIT_MS, browser, log_in  # noqa: F401 - the browser fixture
from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.gateway.test_poolhealth_live import leader_among
from tests.servers import ROOT, Server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SHOTS = ROOT / "artifacts" / "walkthrough"
# USD per million tokens: high, so that a handful of scripted answers costs whole cents.
PRICES = {"*": {"input": 1000, "output": 2000}}


@pytest.fixture
def ops_gateway(django_db_blocker: Any, gateway: Server) -> Server:
    """The package's gateway, once it is the one doing the pool's background work (cool-downs
    ending, re-tests): that runs in one process at a time, and without Redis between processes a
    page hears it only from the process that does it. A gateway of an earlier test may still hold
    the lease for its last seconds."""

    with django_db_blocker.unblock():
        leader_among([gateway], timeout=20)
    return gateway


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.wait_for_timeout(1500)  # past the highlight of cells that just changed
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.1)
    return value


def test_ops_find_the_failing_account_watch_the_pool_heal_see_spend_and_export(
        browser: Any, ops_gateway: Server, mock_upstream: Server) -> None:  # noqa: F811
    expect = pytest.importorskip("playwright.sync_api").expect
    User.objects.create_user("ops", password=PASSWORD, is_staff=True)
    tag = uuid.uuid4().hex[:8]
    rules = [{**r, "retest_after": 1} if r["name"] == "auth_invalid" else r for r in DEFAULT_RULES]
    load(pool_config(mock_upstream, {"openai_chat": [f"sk-fail-401-{tag}", f"sk-fail-429-25s-{tag}x",
                                                     f"sk-good-{tag}"]}, rules=rules, prices=PRICES))
    httpx.post(mock_upstream.url + "/_mock/reset")
    revoked, cooling, good = Account.objects.filter(provider__name="up-openai_chat").order_by("label")
    base = ops_gateway.url

    # Traffic: the pool tries the bad accounts in turn; every request is still answered.
    sdk = clients.openai_client(base, CLIENT_KEY)
    for _ in range(3):
        assert clients.chat_call(sdk, "up-openai_chat/mock-text", [{"role": "user", "content": "hi"}], False).text

    def status(account: Account) -> str:
        account.refresh_from_db()
        return account.status

    until(lambda: status(revoked) == Account.DISABLED and status(cooling) == Account.COOLING, 5,
          "the 401 account disabled and the 429 account cooling")

    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    errors: list[str] = []
    context.on("weberror", lambda e: errors.append(str(e.error)))
    log_in(context.new_page(), base)

    # 1. Which account is failing, and why: the accounts page, filtered to what is out of the pool,
    #    then the account's own page with the upstream's words.
    accounts = context.new_page()
    accounts.goto(f"{base}/dashboard/usage/?window=1h")
    accounts.wait_for_selector("#live-status.on", timeout=WAIT_MS)
    revoked_row = accounts.locator(f'tr[data-account-id="{revoked.pk}"]')
    summary = accounts.locator('tr[data-provider="up-openai_chat"]')
    expect(summary.locator('[data-field="disabled"]')).to_have_text("1")
    expect(summary.locator('[data-field="cooling"]')).to_have_text("1")
    accounts.get_by_label("Status").select_option("disabled")
    accounts.get_by_role("button", name="Filter").click()
    accounts.wait_for_url(re.compile(r".*status=disabled.*"))
    listed = accounts.locator("tr[data-account-id]")
    expect(listed).to_have_count(1)
    assert listed.get_attribute("data-account-id") == str(revoked.pk)
    shot(accounts, "1-disabled-accounts")
    accounts.goto(f"{base}/dashboard/usage/?window=1h")
    accounts.wait_for_selector("#live-status.on", timeout=WAIT_MS)
    expect(revoked_row.locator('[data-field="status"]')).to_have_text("Disabled")
    expect(accounts.locator(f'tr[data-account-id="{good.pk}"] [data-field="status"]')).to_have_text("Active")
    detail = context.new_page()
    detail.goto(f"{base}/dashboard/accounts/{revoked.pk}/?window=1h")
    reason = detail.locator("body").inner_text()
    assert "401" in reason and "auth_invalid" in reason
    shot(detail, "2-failing-account")

    # 2. The cool-down ends at its time and the page shows it, with no request and no reload (25 s:
    #    long enough for the steps above on a loaded machine, where 6 s ran out before the page looked).
    accounts.evaluate("window.__notReloaded = true")
    cooling_status = accounts.locator(f'tr[data-account-id="{cooling.pk}"] [data-field="status"]')
    expect(cooling_status).to_have_text("Cooling down")
    expect(cooling_status).to_have_text("Active", timeout=45_000)
    shot(accounts, "3-cool-down-ended")

    # 3. The revoked key works again (the provider restored it): the scheduled re-test finds it
    #    answering and the account comes back by itself, on the open page.
    httpx.post(mock_upstream.url + "/_mock/heal", json={"key_suffix": tag}).raise_for_status()
    expect(revoked_row.locator('[data-field="status"]')).to_have_text("Active", timeout=15_000)
    # The provider's summary follows: three active, none out.
    expect(summary.locator('[data-field="active"]')).to_have_text("3", timeout=WAIT_MS)
    expect(summary.locator('[data-field="disabled"]')).to_have_text("0")
    expect(summary.locator('[data-field="cooling"]')).to_have_text("0")
    assert accounts.evaluate("window.__notReloaded") is True
    shot(accounts, "4-account-back")

    # 4. What the client key spent: the keys page, then the key's own page, in dollars, matching
    #    the price of the tokens the request log counted.
    key = ApiKey.objects.get(name="e2e")
    rows = until(lambda: list(RequestLog.objects.filter(client_key=key, status=200)), 5, "the log rows written")
    spent = sum((Decimal(r.input_tokens * 1000 + r.output_tokens * 2000) / 1_000_000 for r in rows), Decimal(0))
    keys = context.new_page()
    keys.goto(f"{base}/dashboard/keys/?window=1h")
    keys.get_by_role("link", name="e2e").click()
    keys.wait_for_url(re.compile(rf".*/dashboard/keys/{key.pk}/.*"))
    shown = keys.locator('[data-field="cost"]').first.inner_text()
    assert Decimal(re.sub(r"[^0-9.]", "", shown)) == spent.quantize(Decimal("0.01")) or \
        abs(Decimal(re.sub(r"[^0-9.]", "", shown)) - spent) < Decimal("0.005"), (shown, spent)
    shot(keys, "5-key-spend")

    # 5. The request log as CSV, from the page's own link: every request of the round, no key.
    log = context.new_page()
    log.goto(f"{base}/dashboard/requests/")
    with log.expect_download() as download:
        log.get_by_role("link", name="Download CSV").click()
    body = Path(download.value.path()).read_text()
    exported = list(csv.DictReader(io.StringIO(body)))
    ours = [r for r in exported if r["client_key"] == "e2e"]
    assert len(ours) == RequestLog.objects.filter(client_key=key).count() >= 3
    assert CLIENT_KEY not in body and tag not in body  # neither the client key nor any upstream key
    shot(log, "6-request-log")
    assert errors == []
    context.close()
