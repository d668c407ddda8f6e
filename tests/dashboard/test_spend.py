"""Spend on the dashboard: per client key, model and provider from the spend buckets, cost in the request
log and its filter, and the CSV exports, all from requests written the way the gateway writes them."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.urls import reverse

from accounts.budgetwindows import KEY, TEAM, Subject
from accounts.models import Account, ApiKey, Provider, Team
from tests.dashboard.conftest import make_account, make_key, record, write

pytestmark = pytest.mark.django_db

# USD per million tokens. gpt-test: 1000 in + 500 out = $0.002 + $0.005 = $0.007 a request;
# gpt-big: a million tokens in = $2.00.
PRICES = {"gpt-*": {"input": 2, "output": 10}}


def text(response: Any) -> str:
    assert response.status_code == 200
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode()))


def streamed(response: Any) -> str:
    """A streamed response's body, read the way the ASGI server reads it (its iterator is asynchronous)."""

    async def read() -> bytes:
        return b"".join([part async for part in response.streaming_content])

    return async_to_sync(read)().decode()


def row_of(html: str, marker: str) -> str:
    return html.split(marker, 1)[1].split("</tr>", 1)[0]


def field(row: str, name: str) -> str:
    found = re.search(f'data-field="{name}">([^<]*)<', row)
    assert found, row
    return found.group(1)


@pytest.fixture
def traffic(provider: Provider) -> dict[str, Any]:
    provider.prices = PRICES
    provider.save()
    other = Provider.objects.create(name="up-other", protocol="anthropic", base_url="http://127.0.0.1:9/v1",
                                    prices={"claude-*": {"input": 1, "output": 1}})
    a, b = make_key("team-a"), make_key("team-b")
    acc, acc2 = make_account(provider, "a1"), make_account(other, "o1")
    common = {"input_tokens": 1000, "output_tokens": 500}
    write([record(acc, client_key_id=a.pk, client_key_name=a.name, **common) for _ in range(3)]
          + [record(acc, client_key_id=a.pk, client_key_name=a.name, ago=dt.timedelta(days=2), **common)]
          + [record(acc, client_key_id=b.pk, client_key_name=b.name, model_requested="gpt-big",
                    model_sent="gpt-big", input_tokens=1_000_000, output_tokens=0,
                    request_body="sk-live-secret-in-a-body"),
             record(acc, client_key_id=b.pk, client_key_name=b.name, status=500, error_class="upstream_error"),
             record(acc2, client_key_id=b.pk, client_key_name=b.name, model_requested="claude-x",
                    model_sent="claude-x", input_tokens=500_000, output_tokens=500_000)])  # $1.00
    return {"a": a, "b": b, "provider": provider, "other": other}


def test_client_keys_list_shows_each_keys_spend_in_the_window_and_sorts(staff_client: Client,
                                                                       traffic: dict[str, Any]) -> None:
    a, b = traffic["a"], traffic["b"]
    html = staff_client.get(reverse("dashboard:keys") + "?window=24h").content.decode()
    row_a, row_b = row_of(html, f'data-key-id="{a.pk}"'), row_of(html, f'data-key-id="{b.pk}"')
    assert (field(row_a, "requests"), field(row_a, "errors"), field(row_a, "tokens"), field(row_a, "cost")) == \
        ("3", "0", "4,500", "$0.021")
    assert (field(row_b, "requests"), field(row_b, "errors"), field(row_b, "cost")) == ("3", "1", "$3.00")
    assert html.index(f'data-key-id="{b.pk}"') < html.index(f'data-key-id="{a.pk}"')  # most spent first
    by_name = staff_client.get(reverse("dashboard:keys") + "?window=24h&sort=name").content.decode()
    assert by_name.index(f'data-key-id="{a.pk}"') < by_name.index(f'data-key-id="{b.pk}"')
    week = staff_client.get(reverse("dashboard:keys") + "?window=7d").content.decode()
    assert field(row_of(week, f'data-key-id="{a.pk}"'), "cost") == "$0.028"  # the request 2 days ago too
    assert field(row_of(week, f'data-key-id="{a.pk}"'), "requests") == "4"


def test_a_keys_budgets_show_what_it_spent_in_each_rolling_window(staff_client: Client,
                                                                 traffic: dict[str, Any]) -> None:
    a = traffic["a"]
    ApiKey.objects.filter(pk=a.pk).update(usd_budget_5h=Decimal("1"), usd_budget_week=Decimal("1"))
    response = staff_client.get(reverse("dashboard:key", args=[a.pk]))
    # Three requests at $0.007 now, one two days ago: in the week's window, not in the five hours'.
    assert "$0.021 of $1.00 in the last 5 hours ; $0.028 of $1.00 in the last 7 days" in text(response)
    assert 'class="err"' not in response.content.decode().split('data-field="budgets"', 1)[1].split("</td>", 1)[0]


def test_a_keys_page_charts_its_spend_and_breaks_it_down_per_model_and_provider(
        staff_client: Client, traffic: dict[str, Any]) -> None:
    b = traffic["b"]
    ApiKey.objects.filter(pk=b.pk).update(usd_budget_day=Decimal("3"), usd_budget_month=Decimal("80.5"))
    response = staff_client.get(reverse("dashboard:key", args=[b.pk]) + "?window=24h")
    html = response.content.decode()
    assert html.count("<svg") == 4 and "<h3>Spend (USD) per hour, last 24 hours</h3>" in html
    assert field(html, "cost") == "$3.00" and field(html, "requests") == "3"
    # Each budget with what the key spent in its rolling window; the spent one is marked.
    assert "$3.00 of $3.00 in the last 24 hours ; $3.00 of $80.50 in the last 30 days" in text(response)
    budgets = html.split('data-field="budgets"', 1)[1].split("</td>", 1)[0]
    assert budgets.count('class="err"') == 1 and budgets.index('class="err"') < budgets.index("$80.50")
    models = html.split('data-spend="model"', 1)[1].split("</table>", 1)[0]
    assert field(row_of(models, "gpt-big"), "cost") == "$2.00"
    assert field(row_of(models, "claude-x"), "cost") == "$1.00"
    assert field(row_of(models, "gpt-test"), "errors") == "1"  # the failed request, priced at nothing
    providers = html.split('data-spend="provider"', 1)[1].split("</table>", 1)[0]
    assert field(row_of(providers, "up-chat"), "cost") == "$2.00"
    assert field(row_of(providers, "up-other"), "cost") == "$1.00"


def test_spend_page_sums_every_key_per_model_and_per_provider(staff_client: Client,
                                                              traffic: dict[str, Any]) -> None:
    html = staff_client.get(reverse("dashboard:spend") + "?window=24h").content.decode()
    models = html.split('data-spend="model"', 1)[1].split("</table>", 1)[0]
    assert field(row_of(models, "gpt-test"), "cost") == "$0.021"
    assert field(row_of(models, "gpt-test"), "requests") == "4"  # three of team-a's, team-b's failed one
    providers = html.split('data-spend="provider"', 1)[1].split("</table>", 1)[0]
    assert field(row_of(providers, "up-chat"), "cost") == "$2.02"  # cents from a dollar up
    assert field(providers.split("up-other", 1)[1], "cost") == "$1.00"
    assert 'data-field="cost">$3.02<' in html


def test_request_log_shows_each_requests_cost_and_filters_by_a_least_cost(staff_client: Client,
                                                                          traffic: dict[str, Any]) -> None:
    page = text(staff_client.get(reverse("dashboard:requests")))
    assert page.count("$0.007") == 4 and "$2.00" in page and "$1.00" in page
    costly = text(staff_client.get(reverse("dashboard:requests") + "?min_cost=1"))
    assert "gpt-big" in costly and "claude-x" in costly and "gpt-test" not in costly
    refused = staff_client.get(reverse("dashboard:requests") + "?min_cost=-1")
    assert refused.status_code == 200 and "greater than or equal to 0" in refused.content.decode()


@pytest.mark.django_db(transaction=True)  # the export reads on worker threads: they must see the rows
def test_request_log_csv_follows_the_filters_and_holds_no_secret(staff_client: Client,
                                                                 traffic: dict[str, Any]) -> None:
    b = traffic["b"]
    response = staff_client.get(reverse("dashboard:requests_csv") + f"?client_key={b.pk}")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert response.streaming
    body = streamed(response)
    rows = list(csv.DictReader(io.StringIO(body)))
    assert len(rows) == 3 and {r["client_key"] for r in rows} == {"team-b"}
    assert sorted(r["cost_usd"] for r in rows) == ["", "1.00000000", "2.00000000"]
    assert {r["status"] for r in rows} == {"200", "500"}
    assert "sk-live-secret" not in body and b.key_hint not in body and b.key_hash not in body
    everything = streamed(staff_client.get(reverse("dashboard:requests_csv")))
    # Rows other tests left in the shared test database (transactional tests flush after, not before) aside:
    ours = [r for r in csv.DictReader(io.StringIO(everything)) if r["client_key"] in {"team-a", "team-b"}]
    assert len(ours) == 7


@pytest.mark.django_db(transaction=True)
def test_request_log_csv_reads_past_its_first_chunk_in_order(staff_client: Client, provider: Provider,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from dashboard import export

    monkeypatch.setattr(export, "CHUNK", 2)
    acc = make_account(provider, "csv-in-chunks")
    write([record(acc, ago=dt.timedelta(seconds=i), model_requested=f"=m{i}") for i in range(5)])
    body = streamed(staff_client.get(reverse("dashboard:requests_csv")))
    # This account's rows: a row another test's gateway wrote behind can land in the shared table
    # after that test's flush (seen on PostgreSQL), between these in time.
    rows = [r for r in csv.DictReader(io.StringIO(body)) if r["account"] == acc.label]
    # Newest first, each once, and a client's "=…" model name cannot run as a spreadsheet formula.
    assert [r["model_requested"] for r in rows] == ["'=m0", "'=m1", "'=m2", "'=m3", "'=m4"]


def test_spend_csv_per_key_model_and_provider(staff_client: Client, traffic: dict[str, Any]) -> None:
    def parsed(by: str) -> dict[str, dict[str, str]]:
        response = staff_client.get(reverse("dashboard:spend_csv") + f"?by={by}&window=24h")
        assert response.status_code == 200 and "attachment" in response["Content-Disposition"]
        return {r[by]: r for r in csv.DictReader(io.StringIO(response.content.decode()))}

    keys = parsed("key")
    assert Decimal(keys["team-a"]["cost_usd"]) == Decimal("0.021") and keys["team-a"]["requests"] == "3"
    assert Decimal(keys["team-b"]["cost_usd"]) == Decimal("3") and keys["team-b"]["errors"] == "1"
    assert Decimal(parsed("model")["gpt-big"]["cost_usd"]) == Decimal("2")
    providers = parsed("provider")
    assert Decimal(providers["up-chat"]["cost_usd"]) == Decimal("2.021")
    assert Decimal(providers["up-other"]["cost_usd"]) == Decimal("1")
    assert staff_client.get(reverse("dashboard:spend_csv") + "?by=nonsense").status_code == 400


def test_rebuilding_the_spend_buckets_from_the_log_gives_what_the_writer_added(traffic: dict[str, Any]) -> None:
    from accounts.models import RequestLog
    from dashboard import spend
    from dashboard.models import SpendBucket

    def buckets() -> list[tuple[Any, ...]]:
        return sorted(SpendBucket.objects.values_list("start", "client_key_id", "provider_id", "model", "requests",
                                                      "errors", "input_tokens", "output_tokens", "cost_nanos"))

    written = buckets()
    assert sum(b[-1] for b in written) == 3_028_000_000  # $3.028 in nano-dollars: every request, priced
    assert spend.rebuild(RequestLog) == 7
    assert buckets() == written


@pytest.mark.django_db(transaction=True)
def test_a_keys_usd_budget_is_kept_from_the_spend_buckets_as_from_the_log(traffic: dict[str, Any]) -> None:
    import asyncio

    from dashboard.spend import spent_by_slice
    from gateway.errors import RateLimited
    from gateway.limits import Limits
    from gateway.limits.budgets import usd_logged
    from gateway.state import key_info

    a, b = traffic["a"], traffic["b"]
    team = Team.objects.create(name="both")
    ApiKey.objects.filter(pk__in=[a.pk, b.pk]).update(team=team)
    now = dt.datetime.now(dt.timezone.utc).timestamp()
    for width in (300, 1800, 10_800, 43_200):  # every window's slices: the buckets group as the log does
        since = dt.datetime.fromtimestamp((now - 3 * 86_400) // width * width, dt.timezone.utc)
        subjects = [Subject(KEY, a.pk, a.name), Subject(KEY, b.pk, b.name), Subject(TEAM, team.pk, team.name)]
        for subject in subjects:
            assert spent_by_slice(subject, since, width) == usd_logged(subject, since, width)
        sliced = spent_by_slice(subjects[0], since, width)
        assert len(sliced) == 2 and sum(sliced.values()) == Decimal("0.028")  # three now, one two days ago
        assert all(start % width == 0 for start in sliced)
        assert sum(spent_by_slice(subjects[2], since, width).values()) == Decimal("3.028")  # the team: both keys'
    ApiKey.objects.filter(pk__in=[a.pk, b.pk]).update(team=None)
    ApiKey.objects.filter(pk=b.pk).update(usd_budget_day=Decimal("3"))
    b.refresh_from_db()

    async def refused() -> str:
        limits = Limits(usd_spent=spent_by_slice)
        with pytest.raises(RateLimited) as over:
            await limits.admit(key_info(b), "r", lambda budget: 0, PRICES)
        return over.value.message

    assert asyncio.run(refused()).startswith(
        "This key's 24-hour USD budget of $3.00 is used up ($3.00 in the last 24 hours)")
