"""The admin says exactly what happened: times to the second with their zone (a 20-second cool-down's end
reads as such), money as the rest of the project writes it, "client keys" by that name, the attempts of a
request as a table a click from the dashboard's trace, and whose admin it is."""

from __future__ import annotations

import datetime as dt
import html
import re
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from accounts import pool
from accounts.models import Account, ApiKey, DisableEvent, Provider, RequestLog
from alerts.models import Delivery, Webhook

pytestmark = pytest.mark.django_db

AT = dt.datetime(2026, 11, 27, 20, 0, 15, tzinfo=dt.timezone.utc)
UNTIL = AT + dt.timedelta(seconds=20)


@pytest.fixture
def admin_client(client: Client) -> Client:
    client.force_login(User.objects.create(username="root", is_staff=True, is_superuser=True))
    return client


def page(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())))


@pytest.fixture
def cooling() -> Account:
    provider = Provider.objects.create(name="up", protocol="openai_chat", base_url="http://127.0.0.1:9/v1")
    account = Account(provider=provider, label="acct-1", balance=Decimal("56.37"))
    account.set_secret("sk-test-precision-0000")
    account.save()
    pool.disable_account(account.pk, rule="exhausted", tier="tier3_account_exhausted", status_code=429,
                         excerpt="slow down", cooldown_until=UNTIL)
    DisableEvent.objects.filter(account=account).update(created_at=AT)
    account.refresh_from_db()
    return account


def test_disable_events_show_when_to_the_second_with_the_zone(admin_client: Client, cooling: Account) -> None:
    listed = page(admin_client, reverse("admin:accounts_disableevent_changelist"))
    assert "2026-11-27 20:00:15 UTC" in listed and "2026-11-27 20:00:35 UTC" in listed
    event = DisableEvent.objects.get()
    detail = page(admin_client, reverse("admin:accounts_disableevent_change", args=[event.pk]))
    assert "2026-11-27 20:00:15 UTC" in detail and "2026-11-27 20:00:35 UTC" in detail
    assert "up/acct-1 disabled 2026-11-27 20:00:15 UTC (tier3_account_exhausted)" in detail  # its title too
    assert "p.m." not in listed + detail and "Nov." not in listed + detail


def test_an_accounts_cool_down_end_reads_to_the_second_and_its_balance_without_trailing_places(
        admin_client: Client, cooling: Account) -> None:
    source = admin_client.get(reverse("admin:accounts_account_change", args=[cooling.pk])).content.decode()
    assert "2026-11-27 20:00:35 UTC" in page(admin_client, reverse("admin:accounts_account_change", args=[cooling.pk]))
    assert re.search(r'name="balance"[^>]*value="56.37"', source) and "56.37000000" not in source
    assert f'href="{reverse("dashboard:account", args=[cooling.pk])}"' in source  # and it is a click away
    listed = page(admin_client, reverse("admin:accounts_account_changelist"))
    assert "$56.37" in listed and "11-27 20:00:35 UTC" in listed


def test_an_edited_balance_reads_back_as_entered(admin_client: Client, cooling: Account) -> None:
    url = reverse("admin:accounts_account_change", args=[cooling.pk])
    response = admin_client.post(url, {"provider": cooling.provider_id, "label": "acct-1", "secret": "",
                                       "balance": "0.5", "weight": 1, "tier": 1, "max_concurrent": ""})
    assert response.status_code == 302
    cooling.refresh_from_db()
    assert cooling.balance == Decimal("0.5")
    source = admin_client.get(url).content.decode()
    assert re.search(r'name="balance"[^>]*value="0.50"', source) and "0.50000000" not in source


def test_deliveries_show_their_times_to_the_second(admin_client: Client) -> None:
    hook = Webhook.objects.create(name="ops", url="https://hooks.example/x")
    delivery = Delivery.objects.create(webhook=hook, event="account_disabled", event_key="k", payload={},
                                       created_at=AT, next_attempt_at=UNTIL)
    assert "2026-11-27 20:00:15 UTC" in page(admin_client, reverse("admin:alerts_delivery_changelist"))
    detail = page(admin_client, reverse("admin:alerts_delivery_change", args=[delivery.pk]))
    assert "2026-11-27 20:00:15 UTC" in detail and "2026-11-27 20:00:35 UTC" in detail


def test_the_request_page_shows_its_time_cost_and_attempts_as_a_table_linked_to_the_trace(
        admin_client: Client, cooling: Account) -> None:
    row = RequestLog.objects.create(
        request_id="req_precision_1", client_protocol="openai_chat", upstream_protocol="openai_chat",
        status=200, created_at=AT, cost=Decimal("0.00042"), attempt_count=2, account=cooling,
        attempts=[{"account_id": cooling.pk, "account_label": "acct-1", "status": 429, "verdict": "disable",
                   "latency_ms": 31, "error": "slow down sk-live-0123456789abcdefgh", "tier": "tier3_account_exhausted"},
                  {"account_id": None, "account_label": "acct-2", "status": 200, "verdict": "ok", "latency_ms": 1200}])
    url = reverse("admin:accounts_requestlog_change", args=[row.pk])
    source = admin_client.get(url).content.decode()
    text = page(admin_client, url)
    assert "2026-11-27 20:00:15 UTC" in text
    assert "$0.00042" in text and "0.00042000" not in text
    table = source.split('<table class="attempt-trace">', 1)[1].split("</table>", 1)[0]
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", table, re.DOTALL)]
    assert cells[:6] == ["1", "acct-1", "429", "account disabled, retried", "tier3_account_exhausted", "31 ms"]
    assert cells[7:13] == ["2", "acct-2", "200", "answered", "—", "1,200 ms"]
    assert "sk-live-0123456789abcdefgh" not in source and "[redacted]" in cells[6]
    assert f'href="{reverse("admin:accounts_account_change", args=[cooling.pk])}"' in table
    assert 'href="/dashboard/requests/req_precision_1/"' in source
    # The list keeps to the second too, money as money.
    listed = page(admin_client, reverse("admin:accounts_requestlog_changelist"))
    assert "11-27 20:00:15 UTC" in listed and "$0.00042" in listed


def test_client_keys_are_called_client_keys_in_the_admin(admin_client: Client) -> None:
    key = ApiKey(name="team-a")
    key.set_key("gw-precision-key-0000")
    key.save()
    index = page(admin_client, reverse("admin:index"))
    assert "Client keys" in index and "Api keys" not in index and "Api key" not in index
    listed = page(admin_client, reverse("admin:accounts_apikey_changelist"))
    assert "Select client key to change" in listed and "Home › Upstream pool › Client keys" in listed
    change = page(admin_client, reverse("admin:accounts_apikey_change", args=[key.pk]))
    assert "Home › Upstream pool › Client keys › team-a" in change and "Api key" not in change


def test_the_admin_is_branded(admin_client: Client) -> None:
    source = admin_client.get(reverse("admin:index")).content.decode()
    assert "<title>Providers, accounts, client keys and the request log | LLM gateway admin</title>" in source
    assert "LLM gateway administration" in source and "Django administration" not in source


@pytest.mark.parametrize("value, shown", [("0.5", "0.50"), ("56.37000000", "56.37"), ("0.00040000", "0.0004"),
                                          ("12", "12.00"), (None, "")])
def test_amounts_in_inputs_keep_the_digits_that_mean_something(value: Any, shown: str) -> None:
    from accounts.formats import amount

    assert amount(value if value is None else Decimal(value)) == shown


def test_a_money_column_writes_dollars() -> None:
    from accounts.adminfields import money_column

    column = money_column("usd_budget_day", "budget per 24 hours")
    key = ApiKey(name="k", usd_budget_day=Decimal("0.500000"))
    assert column(key) == "$0.50" and column(ApiKey(name="none")) == "—"


def test_client_keys_and_teams_show_their_budgets_in_dollars(admin_client: Client) -> None:
    from accounts.models import Team

    team = Team.objects.create(name="search", usd_budget_month=Decimal("56.37"))
    key = ApiKey.objects.create(name="team-03", key_hash="x" * 64, team=team, usd_budget_day=Decimal("0.5"))
    listed = page(admin_client, reverse("admin:accounts_apikey_changelist"))
    assert "$0.50" in listed and "0.500000" not in listed
    for url in (reverse("admin:accounts_apikey_change", args=[key.pk]),
                reverse("admin:accounts_team_change", args=[team.pk])):
        source = admin_client.get(url).content.decode()
        assert re.search(r'name="usd_budget_(day|month)"[^>]*value="(0.50|56.37)"', source), url
        assert "0.50000000" not in source and "56.37000000" not in source, url
