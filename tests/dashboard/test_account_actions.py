"""Acting on an account from the dashboard: enable, disable with a reason, test now; why an account is out
of the pool; staff only, with the CSRF token, each action audited (its event and who did it)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from accounts import pool, testnow
from accounts.models import Account, DisableEvent, Provider
from tests.dashboard.conftest import make_account
from tests.dashboard.test_pages import text, text_of_row

pytestmark = pytest.mark.django_db


def row_text(client: Client, account: Account) -> str:
    """The account's row on the accounts page, as one line of text."""

    return " ".join(text_of_row(client.get(reverse("dashboard:usage")).content.decode(), account.pk))


def post(client: Client, name: str, account: Account, **data: str) -> Any:
    return client.post(reverse(f"dashboard:account_{name}", args=[account.pk]),
                       {"next": reverse("dashboard:usage"), **data})


def audit_of(account: Account) -> list[tuple[str, str]]:
    return [(e.user.username, e.change_message) for e in
            LogEntry.objects.filter(object_id=str(account.pk)).select_related("user").order_by("id")]


def test_disable_with_a_reason_then_enable_from_the_accounts_page(staff_client: Client, provider: Provider) -> None:
    a = make_account(provider, "alpha")
    response = post(staff_client, "disable", a, reason="  rotating   the key ")
    assert response.status_code == 302 and response["Location"] == f"/dashboard/usage/#account-{a.pk}"
    a.refresh_from_db()
    assert (a.status, a.disabled_by_hand) == (Account.DISABLED, True)
    event = DisableEvent.objects.get(account=a)
    assert (event.rule, event.excerpt, event.ended_at) == ("manual", "rotating the key", None)
    # What the operator reads on the row after the redirect: the status, why, and what the action did.
    row = row_text(staff_client, a)
    assert "Disabled" in row and "disabled by hand: rotating the key" in row
    assert "Disabled by hand: rotating the key" in row  # the action's result, on its own row

    assert post(staff_client, "enable", a).status_code == 302
    a.refresh_from_db()
    event.refresh_from_db()
    assert (a.status, a.disabled_by_hand, event.ended_by) == (Account.ACTIVE, False, "hand")
    assert event.ended_at is not None
    row = row_text(staff_client, a)
    assert "Active" in row and "Enabled: back in the pool" in row and "rotating" not in row
    assert "back in the pool" not in row_text(staff_client, a)  # said once, after the action
    assert audit_of(a) == [("ops", "Disabled from the dashboard: rotating the key"),
                           ("ops", "Enabled from the dashboard")]


def test_the_result_of_an_action_shows_on_the_row_it_was_taken_from(staff_client: Client, provider: Provider) -> None:
    a, b = make_account(provider, "alpha"), make_account(provider, "beta")
    response = post(staff_client, "disable", b, reason="noisy neighbour")
    html = staff_client.get(response["Location"].split("#")[0]).content.decode()
    assert "noisy neighbour" in " ".join(text_of_row(html, b.pk))
    assert "noisy neighbour" not in " ".join(text_of_row(html, a.pk))


def test_disable_without_a_reason_changes_nothing_and_says_so(staff_client: Client, provider: Provider) -> None:
    a = make_account(provider, "alpha")
    post(staff_client, "disable", a, reason="   ")
    a.refresh_from_db()
    assert a.status == Account.ACTIVE and not DisableEvent.objects.exists() and audit_of(a) == []
    assert "Not disabled: say why" in row_text(staff_client, a)


def test_enabling_an_account_in_the_pool_changes_nothing(staff_client: Client, provider: Provider) -> None:
    a = make_account(provider, "alpha")
    post(staff_client, "enable", a)
    assert "Already in the pool: nothing changed" in row_text(staff_client, a)
    assert audit_of(a) == []


def test_why_disabled_names_the_rule_that_matched(staff_client: Client, provider: Provider) -> None:
    revoked, cooling, fine = (make_account(provider, n) for n in ("revoked", "cooling", "fine"))
    pool.disable_account(revoked.pk, rule="auth_invalid", tier="auth_invalid", status_code=401, excerpt="bad key")
    until = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    pool.disable_account(cooling.pk, rule="exhausted", tier="tier3_account_exhausted", status_code=429,
                         excerpt="slow down", cooldown_until=until)
    assert "rule auth_invalid: HTTP 401" in row_text(staff_client, revoked)
    cooling_row = row_text(staff_client, cooling)
    assert "rule exhausted (tier3_account_exhausted): HTTP 429, cool-down until 2030-01-02 03:04:05 UTC" in cooling_row
    assert text_of_row(staff_client.get(reverse("dashboard:usage")).content.decode(), fine.pk)[2] == "—"
    page = text(staff_client.get(reverse("dashboard:account", args=[revoked.pk])))
    assert "Why disabled rule auth_invalid: HTTP 401" in page
    # The account's admin page is a link away, from both pages.
    admin_url = reverse("admin:accounts_account_change", args=[revoked.pk])
    assert f'href="{admin_url}"' in staff_client.get(reverse("dashboard:usage")).content.decode()
    assert f'href="{admin_url}"' in staff_client.get(reverse("dashboard:account", args=[revoked.pk])).content.decode()


def test_the_accounts_page_asks_the_same_few_queries_for_any_number_of_accounts_out(
        staff_client: Client, provider: Provider, django_assert_max_num_queries: Any) -> None:
    for i in range(3):
        pool.disable_account(make_account(provider, f"a{i}").pk, rule="auth_invalid", tier="auth_invalid",
                             status_code=401, excerpt="")
    staff_client.get(reverse("dashboard:usage"))  # the session and the like, read once
    with django_assert_max_num_queries(40) as few:
        staff_client.get(reverse("dashboard:usage"))
    for i in range(3, 30):
        pool.disable_account(make_account(provider, f"a{i}").pk, rule="auth_invalid", tier="auth_invalid",
                             status_code=401, excerpt="")
    with django_assert_max_num_queries(len(few.captured_queries)):
        staff_client.get(reverse("dashboard:usage"))


@dataclass(frozen=True)
class Outcome:
    ok: bool
    status: int | None
    summary: str
    latency_ms: int | None


@pytest.fixture
def no_gateway(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """This process runs no gateway: the Test now signal has no receiver (another test's app may have one)."""

    monkeypatch.setattr(testnow.test_requested, "receivers", [])
    monkeypatch.setattr(testnow.test_requested, "sender_receivers_cache", {})
    asked: list[int] = []
    yield asked


@pytest.mark.django_db(transaction=True)  # the test's database work runs on a worker thread
def test_test_now_shows_the_outcome_and_its_latency_on_the_row(staff_client: Client, provider: Provider,
                                                              no_gateway: list[int]) -> None:
    a = make_account(provider, "alpha")

    async def gateway(sender: Any, *, account_id: int, **kwargs: Any) -> Outcome:
        no_gateway.append(account_id)
        return Outcome(False, 401, "HTTP 401 (auth_invalid): invalid key", 87)

    testnow.test_requested.connect(gateway)
    try:
        assert post(staff_client, "test", a).status_code == 302
    finally:
        testnow.test_requested.disconnect(gateway)
    assert no_gateway == [a.pk]
    assert "Test failed in 87 ms: HTTP 401 (auth_invalid): invalid key" in row_text(staff_client, a)
    said = "Tested from the dashboard: test failed in 87 ms: HTTP 401 (auth_invalid): invalid key"
    assert audit_of(a) == [("ops", said)]


@pytest.mark.django_db(transaction=True)  # the test's database work runs on a worker thread
def test_test_now_without_a_gateway_in_this_process_queues_the_test(staff_client: Client, provider: Provider,
                                                                    no_gateway: list[int]) -> None:
    a = make_account(provider, "alpha")
    post(staff_client, "test", a)
    a.refresh_from_db()
    assert a.probe_requested_at is not None
    row = row_text(staff_client, a)
    assert "Test queued" in row and "queued" in text_of_row(
        staff_client.get(reverse("dashboard:usage")).content.decode(), a.pk)[-2]  # the Last test column


@pytest.mark.django_db(transaction=True)  # the test's database work runs on a worker thread
def test_account_actions_are_refused_to_anonymous_and_non_staff_users(client: Client, provider: Provider,
                                                                       no_gateway: list[int]) -> None:
    a = make_account(provider, "alpha")
    for user in (None, User.objects.create_user("someone")):
        if user:
            client.force_login(user)
        for name in ("disable", "enable", "test"):
            response = post(client, name, a, reason="r")
            assert response.status_code == 302 and response["Location"].startswith("/admin/login/"), name
    a.refresh_from_db()
    assert (a.status, a.probe_requested_at) == (Account.ACTIVE, None)
    assert not DisableEvent.objects.exists() and not LogEntry.objects.exists()


def test_account_actions_are_posts_only(staff_client: Client, provider: Provider) -> None:
    a = make_account(provider, "alpha")
    for name in ("disable", "enable", "test"):
        assert staff_client.get(reverse(f"dashboard:account_{name}", args=[a.pk])).status_code == 405


@pytest.mark.django_db(transaction=True)  # the test's database work runs on a worker thread
def test_account_actions_need_the_csrf_token(staff: User, provider: Provider, no_gateway: list[int]) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff)
    a = make_account(provider, "alpha")
    for name in ("disable", "enable", "test"):
        assert post(client, name, a, reason="r").status_code == 403, name
    a.refresh_from_db()
    assert a.status == Account.ACTIVE and a.probe_requested_at is None and not LogEntry.objects.exists()
    page = client.get(reverse("dashboard:account", args=[a.pk])).content.decode()
    form = page.split(f'action="{reverse("dashboard:account_disable", args=[a.pk])}"', 1)[1]
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
    assert token
    assert post(client, "disable", a, reason="r", csrfmiddlewaretoken=token[1]).status_code == 302
    a.refresh_from_db()
    assert a.status == Account.DISABLED


def test_an_action_never_redirects_off_site(staff_client: Client, provider: Provider) -> None:
    a = make_account(provider, "alpha")
    response = staff_client.post(reverse("dashboard:account_enable", args=[a.pk]), {"next": "https://evil.example/"})
    assert response["Location"] == f"/dashboard/accounts/{a.pk}/#account-{a.pk}"
