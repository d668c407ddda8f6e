"""What staff read on each page, from rows written the way the gateway writes them."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts import pool
from accounts.models import Account, DisableEvent, Provider, RequestAttempt, RequestLog
from accounts.outcomes import Verdict
from gateway.log import writer as reqlog
from tests.dashboard.conftest import make_account, make_key, record, write

pytestmark = pytest.mark.django_db


def text(response: Any) -> str:
    assert response.status_code == 200
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode()))


def test_overview_figures_follow_the_selected_window(staff_client: Client, provider: Provider) -> None:
    a = make_account(provider, "a")
    write([record(a, ttfb_ms=100) for _ in range(8)]
          + [record(a, status=429), record(a, status=500, error_class="upstream_error")]
          + [record(a, ago=dt.timedelta(days=2), input_tokens=1000, output_tokens=1000)])
    day = text(staff_client.get(reverse("dashboard:overview") + "?window=24h"))
    assert "Requests 10 " in day and "Upstream failures what ops act on 20.0 %" in day
    assert "Tokens in / out 100 / 50" in day
    # The 8 first bytes at 100 ms fill the 75–100 ms bucket: interpolated inside it.
    assert "TTFB p50 / p95 / p99 88 ms / 99 ms / 100 ms" in day
    assert "Requests / min last minute 10 " in day  # all ten came just now
    assert "1 active · 0 cooling · 0 disabled" in day
    week = text(staff_client.get(reverse("dashboard:overview") + "?window=7d"))
    assert "Requests 11 " in week and "Tokens in / out 1,100 / 1,050" in week


def test_overview_tells_upstream_failures_from_client_refusals(staff_client: Client, provider: Provider) -> None:
    a = make_account(provider, "a")
    key = make_key("team-x")
    refusals = [("authentication_failed", 401), ("permission_denied", 403), ("rate_limited", 429),
                ("budget_exceeded", 429), ("concurrency_limited", 429)]
    write([record(a) for _ in range(13)]
          + [record(a, status=502, error_class="upstream_error"), record(a, status=504, error_class="upstream_timeout")]
          + [record(None, status=status, error_class=cls, client_key_id=key.pk) for cls, status in refusals])
    day = text(staff_client.get(reverse("dashboard:overview") + "?window=24h"))
    assert "Requests 20 " in day
    assert "Upstream failures what ops act on 10.0 %" in day  # 2 of 20
    assert "Client refusals auth, model, limits, budgets 25.0 %" in day  # 5 of 20


def test_overview_counts_accounts_by_status(staff_client: Client, provider: Provider) -> None:
    make_account(provider, "a")
    make_account(provider, "b", status=Account.DISABLED)
    make_account(provider, "c", status=Account.COOLING, cooldown_until=timezone.now() + dt.timedelta(minutes=1))
    assert "1 active · 1 cooling · 1 disabled" in text(staff_client.get(reverse("dashboard:overview")))


def test_usage_table_shows_each_account_with_window_and_lifetime_figures(staff_client: Client,
                                                                        provider: Provider) -> None:
    a = make_account(provider, "alpha", balance=12.5)
    b = make_account(provider, "beta", status=Account.COOLING,
                     cooldown_until=dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc))
    write([record(a) for _ in range(3)] + [record(b, status=502)] + [record(None, status=401)])
    html = staff_client.get(reverse("dashboard:usage") + "?window=1h").content.decode()
    row_a = html.split(f'data-account-id="{a.pk}"', 1)[1].split("</tr>", 1)[0]
    row_b = html.split(f'data-account-id="{b.pk}"', 1)[1].split("</tr>", 1)[0]
    assert "12.5" in row_a and 'data-field="requests">3<' in row_a and "<svg" in row_a
    assert "Cooling down" in row_b and "2030-01-02 03:04:05" in row_b and 'data-field="errors">1<' in row_b
    assert "reached no account" in html


def test_an_account_that_failed_before_another_answered_shows_the_failure_in_its_figures(
        staff_client: Client, provider: Provider) -> None:
    a, b = make_account(provider, "alpha"), make_account(provider, "beta")
    attempts = [reqlog.Attempt(a.pk, "alpha", 429, "disable", 10), reqlog.Attempt(b.pk, "beta", 200, "ok", 20)]
    write([record(b, attempts=attempts)])
    html = staff_client.get(reverse("dashboard:usage") + "?window=1h").content.decode()
    row_a = text_of_row(html, a.pk)
    assert row_a[6:8] == ["1", "1"] and row_a[-6:-4] == ["1", "1"]  # window and all time: 1 request, 1 error
    assert text_of_row(html, b.pk)[6:8] == ["1", "0"]
    overview = text(staff_client.get(reverse("dashboard:overview") + "?window=1h"))
    assert "Requests 1 " in overview and "Upstream failures what ops act on 0.0 %" in overview  # it went well


def text_of_row(html: str, account_id: int) -> list[str]:
    """The cells of an account's row on the usage page, as text."""

    row = html.split(f'data-account-id="{account_id}"', 1)[1].split("</tr>", 1)[0]
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]


def test_account_page_draws_three_time_series(staff_client: Client, provider: Provider) -> None:
    a = make_account(provider, "a")
    write([record(a, ago=dt.timedelta(hours=h)) for h in range(5)])
    html = staff_client.get(reverse("dashboard:account", args=[a.pk]) + "?window=24h").content.decode()
    assert html.count('<svg class="chart') == 3
    first_chart = html.split('<svg class="chart', 1)[1].split("</svg>", 1)[0]
    assert first_chart.count('<rect class="bar"') in (24, 25)  # one per hour of the window
    assert "5 requests" in text(staff_client.get(reverse("dashboard:account", args=[a.pk])))


def test_disable_events_show_why_and_can_be_re_enabled(staff_client: Client, provider: Provider) -> None:
    a = make_account(provider, "a")
    pool.disable_account(a.pk, rule="status 401", tier="auth_invalid", status_code=401,
                         excerpt="Invalid key sk-live-0123456789abcdef")
    page = text(staff_client.get(reverse("dashboard:events")))
    assert "auth_invalid" in page and "status 401" in page and "401" in page
    assert "sk-live-0123456789abcdef" not in page and "[redacted]" in page
    event = DisableEvent.objects.get()
    response = staff_client.post(reverse("dashboard:enable", args=[event.pk]), {"next": "/dashboard/events/?open=1"})
    assert response.status_code == 302 and response["Location"] == "/dashboard/events/?open=1"
    a.refresh_from_db()
    event.refresh_from_db()
    assert a.status == Account.ACTIVE and event.ended_by == "hand" and event.ended_at is not None
    assert "By hand at" in text(staff_client.get(reverse("dashboard:events")))
    assert "No disable events" in text(staff_client.get(reverse("dashboard:events") + "?open=1"))


def test_a_disabled_account_shows_its_next_scheduled_test_until_it_is_back(staff_client: Client,
                                                                          provider: Provider) -> None:
    a = make_account(provider, "a")
    pool.disable_account(a.pk, rule="auth_invalid", tier="auth_invalid", status_code=401, excerpt="",
                         retest_after=3600)
    Account.objects.filter(pk=a.pk).update(retest_at=dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc))
    shown = "next test 2030-01-02 03:04:05 UTC"
    assert shown in text(staff_client.get(reverse("dashboard:events")))
    assert shown in text_of_row(staff_client.get(reverse("dashboard:usage")).content.decode(), a.pk)
    assert shown in text(staff_client.get(reverse("dashboard:account", args=[a.pk])))
    pool.enable_account(a.pk, how="probe")
    assert "next test" not in text(staff_client.get(reverse("dashboard:events")))
    assert "Successful probe at" in text(staff_client.get(reverse("dashboard:events")))


def test_re_enable_never_redirects_off_site(staff_client: Client, provider: Provider) -> None:
    a = make_account(provider, "a")
    pool.disable_account(a.pk, rule="r", tier="t", status_code=401, excerpt="")
    response = staff_client.post(reverse("dashboard:enable", args=[DisableEvent.objects.get().pk]),
                                 {"next": "https://evil.example/"})
    assert response["Location"] == reverse("dashboard:events")


@pytest.fixture
def varied_log(provider: Provider) -> dict[str, Any]:
    other = Provider.objects.create(name="up-anth", protocol="anthropic", base_url="http://127.0.0.1:9/v1")
    a, b = make_account(provider, "a"), make_account(other, "b")
    key1, key2 = make_key("team-1"), make_key("team-2")
    recs = [
        record(a, client_key_id=key1.pk, client_key_name="team-1", model_requested="m-1"),
        record(a, client_key_id=key2.pk, client_key_name="team-2", model_requested="m-2", stream=True),
        record(b, client_key_id=key1.pk, client_protocol="anthropic", status=429, model_requested="m-1"),
        record(b, client_key_id=key1.pk, status=200, error_class="upstream_timeout", stream=True),
        record(a, status=503, ago=dt.timedelta(days=3), client_protocol="responses"),
    ]
    write(recs)
    return {"a": a, "b": b, "other": other, "key2": key2, "ids": [r.request_id for r in recs]}


@pytest.mark.parametrize("query, expected", [
    ("", [0, 1, 2, 3, 4]),
    ("account={a}", [0, 1, 4]),
    ("account={a_name}", [0, 1, 4]),
    ("account=AN%2FB", [2, 3]),
    ("error=upstream_timeout", [3]),
    ("provider={other}", [2, 3]),
    ("client_key={key2}", [1]),
    ("model=m-1", [0, 2]),
    ("status=429", [2]),
    ("status=5xx", [4]),
    ("status=error", [2, 3, 4]),
    ("protocol=anthropic", [2]),
    ("stream=yes", [1, 3]),
    ("stream=no&account={a}", [0, 4]),
    ("since={two_days_ago}", [0, 1, 2, 3]),
    ("until={two_days_ago}", [4]),
])
def test_request_log_filters(staff_client: Client, varied_log: dict[str, Any], query: str,
                             expected: list[int]) -> None:
    two_days_ago = (timezone.now() - dt.timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    q = query.format(a=varied_log["a"].pk, a_name=str(varied_log["a"]), other=varied_log["other"].pk, key2=varied_log["key2"].pk,
                     two_days_ago=two_days_ago)
    html = staff_client.get(reverse("dashboard:requests") + "?" + q).content.decode()
    shown = re.findall(r'data-request-id="([^"]+)"', html)
    assert sorted(shown) == sorted(varied_log["ids"][i] for i in expected)


def test_a_bad_status_filter_is_reported_not_ignored(staff_client: Client, varied_log: dict[str, Any]) -> None:
    html = staff_client.get(reverse("dashboard:requests") + "?status=teapot").content.decode()
    assert "Use a code (429)" in html


@pytest.mark.parametrize("by_account", [False, True])
def test_pages_walk_the_whole_log_newest_first_without_gaps_or_repeats(staff_client: Client,
                                                                     provider: Provider, by_account: bool) -> None:
    a, b = make_account(provider, "a"), make_account(provider, "b")
    same = timezone.now() - dt.timedelta(minutes=1)
    # Many rows share one timestamp, so a page boundary falls inside a tie. With the account filter
    # (ordered by its attempts' time), half of them had a failed attempt on a before b answered.
    failed_first = [reqlog.Attempt(a.pk, "a", 429, "retry", 5), reqlog.Attempt(b.pk, "b", 200, "ok", 9)]
    write([record(b, created_at=same, attempts=failed_first) if i % 2 else record(a, created_at=same)
           for i in range(70)] + [record(a, ago=dt.timedelta(seconds=i)) for i in range(60)])
    write([record(b, ago=dt.timedelta(seconds=i)) for i in range(5)])  # b's alone: never listed for a
    seen: list[str] = []
    url = reverse("dashboard:requests") + (f"?account={a.pk}" if by_account else "")
    for _ in range(10):
        html = staff_client.get(url).content.decode()
        seen += re.findall(r'data-request-id="([^"]+)"', html)
        older = re.search(r'id="older" href="([^"]+)"', html)
        if not older:
            break
        url = reverse("dashboard:requests") + older.group(1).replace("&amp;", "&")
    tried_a = RequestAttempt.objects.filter(account=a).values("request_id")
    rows = RequestLog.objects.filter(id__in=tried_a) if by_account else RequestLog.objects.all()
    expected = list(rows.order_by("-created_at", "-id").values_list("request_id", flat=True))
    assert seen == expected and len(seen) == (130 if by_account else 135)


def test_paging_keeps_the_filters(staff_client: Client, provider: Provider) -> None:
    a, b = make_account(provider, "a"), make_account(provider, "b")
    write([record(a) for _ in range(55)] + [record(b) for _ in range(10)])
    html = staff_client.get(reverse("dashboard:requests") + f"?account={a.pk}").content.decode()
    older = re.search(r'id="older" href="\?([^"]+)"', html)
    assert older and f"account={a.pk}" in older.group(1)
    rest = staff_client.get(reverse("dashboard:requests") + "?" + older.group(1).replace("&amp;", "&"))
    assert len(re.findall(r'data-request-id="', rest.content.decode())) == 5


def test_garbage_cursors_show_the_first_page(staff_client: Client, provider: Provider) -> None:
    write([record(make_account(provider, "a"))])
    for cursor in ("x", "1_2_3", "99999999999999999999999_1", "_"):
        assert staff_client.get(reverse("dashboard:requests") + f"?after={cursor}").status_code == 200


def test_request_detail_shows_the_attempt_trace(staff_client: Client, provider: Provider) -> None:
    a, b = make_account(provider, "first"), make_account(provider, "second")
    rec = record(b, attempts=[
        reqlog.Attempt(a.pk, "first", 429, Verdict.DISABLE, 12, "Rate limit reached for sk-abcdefghijkl", "tier3"),
        reqlog.Attempt(b.pk, "second", 200, Verdict.OK, 80),
    ], request_body='{"messages": [{"content": "my key is sk-secret-1234567890"}]}', finish_reason="stop")
    write([rec])
    page = text(staff_client.get(reverse("dashboard:request", args=[rec.request_id])))
    assert "1 first 429 account disabled, retried tier3 12 ms Rate limit reached for [redacted]" in page
    assert "2 second 200 answered" in page
    assert "sk-secret-1234567890" not in page and "sk-abcdefghijkl" not in page
    assert "Finish reason stop" in page


def test_unknown_request_ids_are_404(staff_client: Client) -> None:
    assert staff_client.get(reverse("dashboard:request", args=["req_nope"])).status_code == 404


def test_the_sites_root_leads_staff_to_the_dashboard(staff_client: Client) -> None:
    response = staff_client.get("/", follow=True)
    assert response.redirect_chain == [("/dashboard/", 302)]
    assert "<h1>Overview" in response.content.decode()


def test_requests_per_minute_is_the_last_minutes_rate_not_the_windows_average(staff_client: Client,
                                                                             provider: Provider) -> None:
    a = make_account(provider, "a")
    write([record(a) for _ in range(3)] + [record(a, ago=dt.timedelta(minutes=5)) for _ in range(40)])
    page = text(staff_client.get(reverse("dashboard:overview") + "?window=1h"))
    assert "Requests / min last minute 3 " in page and "Requests 43 " in page


def test_charts_say_what_one_bar_counts_and_draw_failures_apart(staff_client: Client, provider: Provider) -> None:
    a = make_account(provider, "a")
    write([record(a) for _ in range(4)] + [record(a, status=502, error_class="upstream_error")])
    day = staff_client.get(reverse("dashboard:overview") + "?window=24h").content.decode()
    assert "<title>Requests per hour, last 24 hours</title>" in day and "Errors per hour" in day
    hour = staff_client.get(reverse("dashboard:overview") + "?window=1h").content.decode()
    assert "<title>Requests per 5 minutes, last hour</title>" in hour
    requests_chart = hour.split("<title>Requests per 5 minutes", 1)[1].split("</svg>", 1)[0]
    assert requests_chart.count('<rect class="bar err"') == 1  # the one bar with a failure shows it
    assert re.search(r"\d\d:\d\d–\d\d:\d\d UTC: 5, 1 failed", requests_chart)
    week = staff_client.get(reverse("dashboard:overview") + "?window=7d").content.decode()
    assert "Requests per day, last 7 days" in week
