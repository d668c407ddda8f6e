"""An ops engineer acts on accounts from the dashboard, in headless Chromium, against a real gateway and
the scripted upstream.

Take an account out of the pool with a reason, see why each account is out (the rule that matched, or
the reason), test an account now and read the outcome and its latency on its row, put the account back
from its own page; then find an account's requests by typing part of its name, with the request log on
one line a row at 1440 px. Each step leaves a screenshot under ``artifacts/walkthrough-accounts/``.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User

from accounts.config_file import load
from accounts.models import Account, DisableEvent, RequestLog
from tests.dashboard.conftest import PASSWORD

# A gateway of this module's own (dashboard_gateway): the audit's LogEntry names the account's content type,
# which a server caches for its life, and the tests that flush the database between them renumber them.
from tests.dashboard.test_browser import browser, dashboard_gateway, log_in  # noqa: F401 - fixtures
from tests.dashboard.test_ops_walkthrough import until
from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import ROOT, Server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SHOTS = ROOT / "artifacts" / "walkthrough-accounts"
REASON = "rotating its key with the provider"


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.wait_for_timeout(1500)  # past the highlight of cells that just changed
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_ops_disable_with_a_reason_test_now_and_enable_from_the_dashboard(
        browser: Any, dashboard_gateway: Server, mock_upstream: Server) -> None:  # noqa: F811
    expect = pytest.importorskip("playwright.sync_api").expect
    User.objects.create_user("ops", password=PASSWORD, is_staff=True)
    tag = uuid.uuid4().hex[:8]
    # The revoked key first: the first request meets it (later ones keep to the session's account).
    load(pool_config(mock_upstream, {"openai_chat": [f"sk-fail-401-{tag}", f"sk-good-{tag}", f"sk-good-{tag}-b"]}))
    httpx.post(mock_upstream.url + "/_mock/reset")
    revoked, steady, spare = Account.objects.filter(provider__name="up-openai_chat").order_by("label")
    base = dashboard_gateway.url

    # Traffic: the pool meets the revoked key, disables it by its rule, and every request is answered.
    sdk = clients.openai_client(base, CLIENT_KEY)
    for _ in range(4):
        assert clients.chat_call(sdk, "up-openai_chat/mock-text", [{"role": "user", "content": "hi"}], False).text
    until(lambda: Account.objects.get(pk=revoked.pk).status == Account.DISABLED, 10, "the 401 account disabled")
    until(lambda: RequestLog.objects.filter(client_key_name="e2e").count() >= 4, 10, "the requests logged")

    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    errors: list[str] = []
    context.on("weberror", lambda e: errors.append(str(e.error)))
    log_in(context.new_page(), base)
    page = context.new_page()
    page.goto(f"{base}/dashboard/usage/?provider=up-openai_chat")
    rows = {a.pk: page.locator(f'tr[data-account-id="{a.pk}"]') for a in (steady, revoked, spare)}

    # 1. Why the revoked account is out: the rule that matched, on its row.
    expect(rows[revoked.pk].locator('[data-field="why_disabled"]')).to_have_text("rule auth_invalid: HTTP 401")
    expect(rows[steady.pk].locator('[data-field="why_disabled"]')).to_have_text("—")
    shot(page, "1-why-disabled")

    # 2. Take the spare account out, with a reason: the row says it is out, and why.
    spare_row = rows[spare.pk]
    spare_row.get_by_text("Disable…").click()
    spare_row.get_by_label("Reason").fill(REASON)
    spare_row.get_by_role("button", name="Disable", exact=True).click()
    expect(page).to_have_url(re.compile(rf".*#account-{spare.pk}$"))
    expect(spare_row.locator('[data-field="status"]')).to_have_text("Disabled")
    expect(spare_row.locator('[data-field="why_disabled"]')).to_have_text(f"disabled by hand: {REASON}")
    expect(spare_row.locator('[data-field="action_result"]')).to_have_text(f"Disabled by hand: {REASON}")
    event = DisableEvent.objects.get(account=spare)
    assert (event.rule, event.excerpt) == ("manual", REASON)
    shot(page, "2-disabled-with-a-reason")

    # 3. Test the revoked account now: the probe goes out from this gateway, and its row says what the
    #    upstream answered and how long it took.
    rows[revoked.pk].get_by_role("button", name="Test now").click()
    expect(page).to_have_url(re.compile(rf".*#account-{revoked.pk}$"))
    result = rows[revoked.pk].locator('[data-field="action_result"]')
    expect(result).to_have_text(re.compile(r"Test failed in [\d,]+ ms: HTTP 401 \(auth_invalid\)"))
    expect(rows[revoked.pk].locator('[data-field="last_test"]')).to_contain_text("HTTP 401 (auth_invalid)")
    assert tag not in page.locator("body").inner_text()  # no upstream key on the page
    shot(page, "3-test-now-failed")

    # 4. Test the spare account: it answers, and stays out (ops took it out; only ops bring it back).
    spare_row.get_by_role("button", name="Test now").click()
    expect(page).to_have_url(re.compile(rf".*#account-{spare.pk}$"))
    expect(spare_row.locator('[data-field="action_result"]')).to_have_text(
        re.compile(r"Test passed in [\d,]+ ms: OK — left disabled: it was disabled by hand"))
    expect(spare_row.locator('[data-field="status"]')).to_have_text("Disabled")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1440  # actions and all, no sideways scroll
    shot(page, "4-test-now-passed")

    # 5. Put it back from its own page, which links to its admin page too.
    page.goto(f"{base}/dashboard/accounts/{spare.pk}/")
    assert page.locator(".actions a.admin-link").get_attribute("href") == f"/admin/accounts/account/{spare.pk}/change/"
    page.get_by_role("button", name="Enable", exact=True).click()
    expect(page).to_have_url(re.compile(rf".*/dashboard/accounts/{spare.pk}/#account-{spare.pk}$"))
    expect(page.locator('.facts [data-field="status"]')).to_have_text("Active")
    expect(page.locator('.facts [data-field="why_disabled"]')).to_have_text("—")
    expect(page.locator('[data-field="action_result"]')).to_have_text("Enabled: back in the pool")
    for heading in ("Requests per 5 minutes, last hour", "Tokens (in + out) per 5 minutes, last hour"):
        page.goto(f"{base}/dashboard/accounts/{spare.pk}/?window=1h")
        expect(page.get_by_role("heading", name=heading)).to_be_visible()  # the charts are titled
    shot(page, "5-enabled-from-its-page")
    spare.refresh_from_db()
    event.refresh_from_db()
    assert spare.status == Account.ACTIVE and event.ended_by == "hand"
    audit = list(LogEntry.objects.filter(object_id=str(spare.pk)).order_by("id").values_list("change_message", flat=True))
    assert audit[0] == f"Disabled from the dashboard: {REASON}" and audit[-1] == "Enabled from the dashboard"
    assert any(m.startswith("Tested from the dashboard: test passed") for m in audit)

    # 6. The request log: the revoked account's requests found by typing part of its name, each row on
    #    one line at 1440 px.
    log = context.new_page()
    log.goto(f"{base}/dashboard/requests/")
    log.get_by_role("combobox", name="Account", exact=True).fill(f"openai_chat/{revoked.label}")
    log.get_by_role("button", name="Filter").click()
    log.wait_for_url(re.compile(r".*account=.*"))
    listed = log.locator("#request-rows tr[data-request-id]")
    expect(listed.first).to_be_visible()
    assert listed.count() == RequestLog.objects.filter(attempt_rows__account=revoked).count() >= 1
    log.goto(f"{base}/dashboard/requests/")
    heights = log.eval_on_selector_all("#request-rows tr[data-request-id]", "rows => rows.map(r => r.offsetHeight)")
    line = log.eval_on_selector("#request-rows tr[data-request-id] td", "td => parseFloat(getComputedStyle(td).lineHeight)")
    assert heights and max(heights) < 1.5 * line + 12, (heights, line)  # one line of text and the cell's padding
    width = log.evaluate("document.documentElement.scrollWidth")
    assert width <= 1440, width
    shot(log, "6-request-log-one-line")
    assert errors == []
    context.close()
