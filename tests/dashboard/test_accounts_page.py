"""The accounts page at 500 accounts: sorted, filtered and paged in the querystring, with a per-provider
summary on top; times and money written the one way the dashboard writes them."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from accounts import secrets
from accounts.models import Account, Provider, RequestLog
from tests.dashboard.conftest import make_account, record, write

pytestmark = pytest.mark.django_db

STATUSES = [Account.ACTIVE, Account.ACTIVE, Account.COOLING, Account.DISABLED]
BASE = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.timezone.utc)


def spec(i: int) -> dict[str, Any]:
    """Account i of the 500: what the page must show about it, decided here, independently of the page."""

    return {
        "provider": ("alpha", "beta", "gamma")[i % 3],
        "label": f"acct-{i:03d}" + ("-team" if i % 7 == 0 else ""),
        "status": STATUSES[i % 4],
        "balance": None if i % 10 == 0 else Decimal(i * 37 % 1000) + Decimal("0.125"),
        "requests": (i * 7919) % 5003,
        "errors": (i * 104729) % 101,
        "last_used_at": None if i % 9 == 0 else BASE + dt.timedelta(seconds=(i * 7717) % 86400),
    }


@pytest.fixture
def five_hundred(db: Any) -> dict[int, dict[str, Any]]:
    providers = {name: Provider.objects.create(name=name, protocol="openai_chat", base_url="http://127.0.0.1:9/v1")
                 for name in ("alpha", "beta", "gamma")}
    secret = secrets.encrypt("sk-test-shared")  # one encryption: 500 of them would cost seconds
    specs = [spec(i) for i in range(500)]
    Account.objects.bulk_create([
        Account(provider=providers[s["provider"]], label=s["label"], status=s["status"], balance=s["balance"],
                requests=s["requests"], errors=s["errors"], last_used_at=s["last_used_at"],
                secret_encrypted=secret, key_hint="sk-…ared")
        for s in specs])
    ids = dict(Account.objects.values_list("label", "pk"))
    return {ids[s["label"]]: s for s in specs}


def ids_on(client: Client, query: str) -> list[int]:
    response = client.get(reverse("dashboard:usage") + query)
    assert response.status_code == 200
    return [int(pk) for pk in re.findall(r'<tr data-account-id="(\d+)"', response.content.decode())]


def every_page(client: Client, query: str) -> list[int]:
    """The accounts of every page in turn, following the page's own "Next" link."""

    out: list[int] = []
    url = reverse("dashboard:usage") + query
    for _ in range(100):
        html = client.get(url).content.decode()
        out += [int(pk) for pk in re.findall(r'<tr data-account-id="(\d+)"', html)]
        link = re.search(r'<a id="next" href="([^"]+)"', html)
        if link is None:
            return out
        url = reverse("dashboard:usage") + link.group(1).replace("&amp;", "&")
    raise AssertionError("the pager never ends")


def test_the_table_shows_fifty_accounts_a_page_and_every_account_once(
        staff_client: Client, five_hundred: dict[int, dict[str, Any]]) -> None:
    first = ids_on(staff_client, "?")
    assert len(first) == 50
    walked = every_page(staff_client, "?sort=provider")
    assert len(walked) == 500 and set(walked) == set(five_hundred)
    expected = sorted(five_hundred, key=lambda pk: (five_hundred[pk]["provider"], five_hundred[pk]["label"]))
    assert walked == expected
    html = staff_client.get(reverse("dashboard:usage") + "?page=3").content.decode()
    assert "page 3 of 10" in html


@pytest.mark.parametrize("key, field", [("balance", "balance"), ("requests", "requests"), ("errors", "errors"),
                                        ("last_used", "last_used_at")])
@pytest.mark.parametrize("desc", [False, True])
def test_each_column_sorts_both_ways_with_empty_values_last(
        staff_client: Client, five_hundred: dict[int, dict[str, Any]], key: str, field: str, desc: bool) -> None:
    walked = every_page(staff_client, f"?sort={key}" + ("&desc=1" if desc else ""))
    values = [five_hundred[pk][field] for pk in walked]
    present = [v for v in values if v is not None]
    assert values == present + [None] * (len(values) - len(present))  # empties last either way
    assert present == sorted(present, reverse=desc)
    assert len(walked) == 500


def test_sorting_by_status_groups_the_statuses(staff_client: Client,
                                               five_hundred: dict[int, dict[str, Any]]) -> None:
    statuses = [five_hundred[pk]["status"] for pk in every_page(staff_client, "?sort=status")]
    assert statuses == sorted(statuses) and len(statuses) == 500


def test_filters_combine_and_paging_keeps_them(staff_client: Client,
                                              five_hundred: dict[int, dict[str, Any]]) -> None:
    expected = {pk for pk, s in five_hundred.items() if s["provider"] == "beta" and s["status"] == Account.ACTIVE}
    assert len(expected) > 50  # more than a page: the pager must keep the filters
    html = staff_client.get(reverse("dashboard:usage") + "?provider=beta&status=active").content.decode()
    assert 'href="?provider=beta&amp;status=active&amp;page=2"' in html
    assert set(every_page(staff_client, "?provider=beta&status=active")) == expected
    team = {pk for pk, s in five_hundred.items() if "team" in s["label"] and s["status"] == Account.DISABLED}
    assert set(every_page(staff_client, "?q=TEAM&status=disabled")) == team
    assert "No account matches" in staff_client.get(reverse("dashboard:usage") + "?q=nobody-by-that-name").content.decode()


def test_nonsense_in_the_querystring_shows_a_page_not_an_error(staff_client: Client,
                                                               five_hundred: dict[int, dict[str, Any]]) -> None:
    assert len(ids_on(staff_client, "?page=999")) == 50  # the last page
    assert len(ids_on(staff_client, "?page=abc&sort=nonsense&status=bogus&provider=nope")) == 50


def test_the_summary_counts_each_providers_accounts_by_status_and_adds_up_its_balance(
        staff_client: Client, five_hundred: dict[int, dict[str, Any]]) -> None:
    html = staff_client.get(reverse("dashboard:usage")).content.decode()
    for name in ("alpha", "beta", "gamma"):
        mine = [s for s in five_hundred.values() if s["provider"] == name]
        row = html.split(f'<tr data-provider="{name}">', 1)[1].split("</tr>", 1)[0]
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        total = sum(s["balance"] for s in mine if s["balance"] is not None)
        assert cells == [name, str(len(mine)),
                         str(sum(s["status"] == Account.ACTIVE for s in mine)),
                         str(sum(s["status"] == Account.COOLING for s in mine)),
                         str(sum(s["status"] == Account.DISABLED for s in mine)),
                         f"${total:,.2f}"]


def test_money_is_dollars_and_cents_and_tiny_costs_stay_readable(staff_client: Client, provider: Provider) -> None:
    a = make_account(provider, "rich", balance=Decimal("1234.5678"),
                     last_used_at=dt.datetime(2026, 5, 6, 7, 8, 9, tzinfo=dt.timezone.utc))
    rec, other = record(a), record(a)
    write([rec, other])
    # Costs come from provider price tables; set them as stored to see how they are written.
    RequestLog.objects.filter(request_id=rec.request_id).update(cost=Decimal("0.00040000"))
    RequestLog.objects.filter(request_id=other.request_id).update(cost=Decimal("2.5"))
    page = staff_client.get(reverse("dashboard:usage")).content.decode()
    row = page.split(f'data-account-id="{a.pk}"', 1)[1].split("</tr>", 1)[0]
    assert ">$1,234.57<" in row and "1234.5678" not in row
    assert "2026-05-06 07:08:09 UTC" in row
    detail = staff_client.get(reverse("dashboard:request", args=[rec.request_id])).content.decode()
    assert '<td class="cost" data-field="cost">$0.0004</td>' in detail
    log = staff_client.get(reverse("dashboard:requests")).content.decode()
    assert ">$0.0004<" in log and ">$2.50<" in log
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", log)
