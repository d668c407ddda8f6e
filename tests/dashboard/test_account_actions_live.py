"""Test now against a real gateway and the scripted upstream: the process serving the page sends the
prober's own probe, and the account's row says how it went and how long it took; a success puts an
account the pool disabled back."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from accounts import pool
from accounts.config_file import load
from accounts.models import Account
from tests.dashboard.test_browser import dashboard_gateway  # noqa: F401 - a gateway of this module's own
from tests.e2e.conftest import pool_config
from tests.e2e.test_attribution import staff_browser
from tests.servers import Server, seen

pytestmark = pytest.mark.django_db(transaction=True)


def press(browser: httpx.Client, account: Account, action: str, **data: str) -> str:
    """Press the account's button on the accounts page, as a browser posts its form; the page it lands on."""

    page = browser.get("/dashboard/usage/").text
    action_url = reverse(f"dashboard:account_{action}", args=[account.pk])
    form = page.split(f'action="{action_url}"', 1)[1].split("</form>", 1)[0]
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
    assert token, form
    response = browser.post(action_url, data={"csrfmiddlewaretoken": token[1], "next": "/dashboard/usage/", **data},
                            headers={"Referer": f"{browser.base_url}/dashboard/usage/"})
    assert response.status_code == 302, response.text
    return browser.get(response.headers["location"]).text


def row(html: str, account: Account) -> str:
    cells = html.split(f'data-account-id="{account.pk}"', 1)[1].split("</tr>", 1)[0]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", cells))


# A gateway of this module's own: the audit's LogEntry names the account's content type, which a server
# caches for its life, and the tests that flush the database between them renumber content types.
def test_test_now_answers_on_the_row_with_the_outcome_and_its_latency(
        dashboard_gateway: Server, mock_upstream: Server) -> None:  # noqa: F811
    gateway = dashboard_gateway
    tag = uuid.uuid4().hex[:6]
    load(pool_config(mock_upstream, {"openai_chat": [f"sk-good-{tag}", f"sk-fail-401-{tag}"]}))
    seen(gateway)
    good, revoked = Account.objects.filter(provider__name="up-openai_chat").order_by("label")
    pool.disable_account(good.pk, rule="exhausted", tier="tier3_account_exhausted", status_code=429, excerpt="")
    with staff_browser(gateway) as browser:
        after = row(press(browser, revoked, "test"), revoked)
        assert re.search(r"Test failed in [\d,]+ ms: HTTP 401 \(auth_invalid\)", after), after
        assert f"sk-fail-401-{tag}" not in after
        after = row(press(browser, good, "test"), good)
        assert re.search(r"Test passed in [\d,]+ ms: OK — account re-enabled", after), after
        assert "Active" in after
    good.refresh_from_db()
    revoked.refresh_from_db()
    assert good.status == Account.ACTIVE and good.probe_ok is True
    assert revoked.probe_ok is False and revoked.probe_summary.startswith("HTTP 401")
    messages: list[Any] = list(LogEntry.objects.filter(object_id__in=[str(good.pk), str(revoked.pk)])
                               .values_list("change_message", flat=True))
    assert len(messages) == 2 and all(m.startswith("Tested from the dashboard: test ") for m in messages)
