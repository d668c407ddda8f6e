"""The ops admin, driven as a logged-in staff user would drive it (Django's test client)."""

from __future__ import annotations

import datetime as dt
import json
import re
import secrets
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts import pool
from accounts.models import Account, ApiKey, DisableEvent, ModelAlias, Provider, RequestLog
from accounts.secrets import hash_client_key
from mockupstream.server import ServerThread

pytestmark = pytest.mark.django_db

IMPORT_URL = "/admin/accounts/account/import/"
ACCOUNTS_URL = "/admin/accounts/account/"


@pytest.fixture(scope="module")
def upstream() -> Iterator[ServerThread]:
    with ServerThread() as server:
        yield server


@pytest.fixture
def staff(client: Client) -> Client:
    """Staff (not superuser) with the accounts app's permissions: the ops role."""

    user = User.objects.create(username="ops", is_staff=True)  # no password: hashing one is slow
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="accounts"))
    client.force_login(user)
    return client


def make_provider(base_url: str = "http://127.0.0.1:9/v1", name: str = "pool") -> Provider:
    return Provider.objects.create(name=name, protocol="openai_chat", base_url=base_url)


def make_account(provider: Provider, label: str, key: str, **fields: Any) -> Account:
    account = Account(provider=provider, label=label, **fields)
    account.set_secret(key)
    account.save()
    return account


def new_key(tag: str = "") -> str:
    return f"sk-{tag}{secrets.token_hex(12)}"


def text_of(response: Any) -> str:
    return response.content.decode()


def action(staff: Client, name: str, accounts: list[Account]) -> str:
    """Run an admin action on the account list; returns the messages shown, one per line."""

    response = staff.post(ACCOUNTS_URL, {"action": name, "_selected_action": [a.pk for a in accounts]},
                          follow=True)
    assert response.status_code == 200
    shown = "\n".join(str(m) for m in response.context["messages"])
    assert all(a.get_secret() not in text_of(response) for a in accounts)
    return shown


# ------------------------------------------------------------------ bulk import

def test_pasting_500_keys_creates_500_accounts_listed_only_masked(staff: Client) -> None:
    provider = make_provider()
    keys = [new_key("paste-") for _ in range(500)]
    response = staff.post(IMPORT_URL, {"provider": provider.pk, "keys": "\n".join(keys), "label_prefix": "k"},
                          follow=True)
    assert "Imported 500 new and updated 0 account(s)" in text_of(response)
    accounts = Account.objects.filter(provider=provider)
    assert accounts.count() == 500
    by_label = {a.label: a for a in accounts}
    assert by_label["k-1"].get_secret() == keys[0] and by_label["k-500"].get_secret() == keys[499]
    assert by_label["k-1"].key_hint == f"sk-…{keys[0][-4:]}"
    pages = [text_of(staff.get(ACCOUNTS_URL, {"p": p})) for p in range(1, 6)]
    assert all(by_label[f"k-{i}"].key_hint in "".join(pages) for i in (1, 250, 500))
    for page in pages:
        assert not any(key in page for key in keys)
        assert not any(a.secret_encrypted in page for a in accounts[:50])


def test_pasting_the_same_keys_again_adds_nothing(staff: Client) -> None:
    provider = make_provider()
    keys = "\n".join(new_key() for _ in range(20))
    staff.post(IMPORT_URL, {"provider": provider.pk, "keys": keys, "label_prefix": "k"})
    response = staff.post(IMPORT_URL, {"provider": provider.pk, "keys": keys + "\n" + new_key("extra-"),
                                       "label_prefix": "k"}, follow=True)
    assert "Imported 1 new and updated 0 account(s); 20 unchanged." in text_of(response)
    assert Account.objects.filter(provider=provider).count() == 21
    assert Account.objects.filter(provider=provider, label="k-21").exists()


def test_csv_upload_sets_labels_and_balances_and_reimport_updates_by_label(staff: Client) -> None:
    provider = make_provider()
    first = {f"team-{i}": new_key("csv-") for i in range(500)}
    csv_text = "label,key,balance\n" + "".join(f"{label},{key},{i}.5\n" for i, (label, key) in
                                                enumerate(first.items()))
    upload = SimpleUploadedFile("keys.csv", csv_text.encode(), content_type="text/csv")
    response = staff.post(IMPORT_URL, {"provider": provider.pk, "file": upload, "label_prefix": "acct"},
                          follow=True)
    assert "Imported 500 new and updated 0 account(s)" in text_of(response)
    assert Account.objects.get(provider=provider, label="team-7").balance == Decimal("7.5")

    rotated = new_key("rotated-")
    again = f"team-7,{rotated},100\nteam-8,{first['team-8']},8.5\nteam-new,{new_key()},\n"
    upload = SimpleUploadedFile("again.csv", again.encode(), content_type="text/csv")
    response = staff.post(IMPORT_URL, {"provider": provider.pk, "file": upload, "label_prefix": "acct"},
                          follow=True)
    assert "Imported 1 new and updated 1 account(s); 1 unchanged." in text_of(response)
    team7 = Account.objects.get(provider=provider, label="team-7")
    assert team7.get_secret() == rotated and team7.balance == Decimal("7.5")  # a live balance is kept
    upload = SimpleUploadedFile("again.csv", again.encode(), content_type="text/csv")
    response = staff.post(IMPORT_URL, {"provider": provider.pk, "file": upload, "label_prefix": "acct",
                                       "reset_balances": "on"}, follow=True)
    team7.refresh_from_db()
    assert team7.balance == Decimal("100")
    assert team7.key_hint == f"sk-…{rotated[-4:]}"
    assert Account.objects.filter(provider=provider).count() == 501


def test_a_bad_import_line_is_reported_without_echoing_any_key(staff: Client) -> None:
    provider = make_provider()
    good = new_key("good-")
    response = staff.post(IMPORT_URL, {"provider": provider.pk, "keys": f"a,{good},1\nb,{good}x,lots\n",
                                       "label_prefix": "k"})
    page = text_of(response)
    assert response.status_code == 200 and "line 2: balance" in page
    assert good not in page
    assert Account.objects.count() == 0  # nothing half-imported


# ------------------------------------------------------------------ masked display

def test_account_change_form_renders_the_secret_field_empty_and_keeps_the_key_when_left_empty(
        staff: Client) -> None:
    provider = make_provider()
    key = new_key("edit-")
    account = make_account(provider, "a", key, balance=Decimal("5"))
    url = reverse("admin:accounts_account_change", args=[account.pk])
    page = text_of(staff.get(url))
    assert key not in page and account.secret_encrypted not in page
    assert re.search(r'<input type="password" name="secret"[^>]*>', page)
    assert 'name="secret" value' not in page
    assert account.key_hint in page

    form = {"provider": provider.pk, "label": "a", "secret": "", "balance": "7", "weight": "1", "tier": "1"}
    assert staff.post(url, form).status_code == 302
    account.refresh_from_db()
    assert account.get_secret() == key and account.balance == Decimal("7")

    replacement = new_key("replaced-")
    staff.post(url, {**form, "secret": replacement})
    account.refresh_from_db()
    assert account.get_secret() == replacement and account.key_hint == f"sk-…{replacement[-4:]}"


def test_status_cannot_be_edited_around_the_pool(staff: Client) -> None:
    provider = make_provider()
    account = make_account(provider, "a", new_key())
    pool.disable_by_hand(account.pk)
    url = reverse("admin:accounts_account_change", args=[account.pk])
    staff.post(url, {"provider": provider.pk, "label": "a", "secret": "", "balance": "", "weight": "1", "tier": "1",
                     "status": "active"})
    account.refresh_from_db()
    assert account.status == Account.DISABLED and account.disabled_by_hand


def test_provider_page_with_inline_accounts_never_shows_a_secret(staff: Client) -> None:
    provider = make_provider()
    keys = [new_key("inline-") for _ in range(3)]
    for i, key in enumerate(keys):
        make_account(provider, f"a{i}", key)
    page = text_of(staff.get(reverse("admin:accounts_provider_change", args=[provider.pk])))
    assert 'name="accounts-0-secret"' in page
    assert not any(key in page for key in keys)


# ------------------------------------------------------------------ actions

def test_disable_then_enable_actions_open_and_close_one_event(staff: Client) -> None:
    provider = make_provider()
    a, b = make_account(provider, "a", new_key()), make_account(provider, "b", new_key())
    assert "Disabled 2 account(s)." in action(staff, "disable_accounts", [a, b])
    assert "Disabled 0 account(s)." in action(staff, "disable_accounts", [a])  # already out: no second event
    assert set(Account.objects.values_list("status", "disabled_by_hand")) == {(Account.DISABLED, True)}
    assert DisableEvent.objects.filter(tier="manual", ended_at__isnull=True).count() == 2

    assert "Enabled 1 account(s)." in action(staff, "enable_accounts", [a])
    a.refresh_from_db()
    assert a.status == Account.ACTIVE and not a.disabled_by_hand
    event = DisableEvent.objects.get(account=a)
    assert event.ended_by == "hand" and event.ended_at is not None
    assert DisableEvent.objects.get(account=b).ended_at is None


@pytest.mark.django_db(transaction=True)
def test_the_test_action_queues_any_number_of_accounts_and_the_list_shows_each_outcome(
        staff: Client, upstream: ServerThread) -> None:
    from tests.gateway.test_prober import run_prober

    provider = make_provider(upstream.url + "/v1")
    bad = make_account(provider, "bad", "sk-fail-401-" + secrets.token_hex(8))
    good = [make_account(provider, f"good-{i}", new_key("probe-")) for i in range(30)]  # past the old cap of 20
    unreachable = make_account(make_provider("http://127.0.0.1:9/v1", "gone"), "a", new_key())
    page = action(staff, "test_accounts", [bad, *good, unreachable])
    assert "32 account(s) queued for a test" in page
    assert "queued" in text_of(staff.get(ACCOUNTS_URL + "?q=bad"))
    assert run_prober() == 32
    listing = text_of(staff.get(ACCOUNTS_URL + "?all="))
    assert re.search(r"HTTP 401 \(auth_invalid\)", listing)
    assert listing.count("OK (") == 30
    assert "network failure" in listing
    assert bad.get_secret() not in listing and not any(g.get_secret() in listing for g in good)
    bad.refresh_from_db()
    assert bad.status == Account.ACTIVE  # a test reports; it does not judge
    assert Account.objects.filter(probe_ok=True).count() == 30


# ------------------------------------------------------------------ client keys

def test_a_new_client_key_is_shown_once_and_only_its_hash_is_stored(staff: Client) -> None:
    response = staff.post("/admin/accounts/apikey/add/", {"name": "team-a", "allowed_models": '["gpt-*"]',
                                                         "active": "on", "max_concurrent_requests": "5"})
    page = text_of(response)
    assert response.status_code == 200 and "no-store" in response.headers.get("Cache-Control", "")
    plain = re.search(r'value="(gw-[A-Za-z0-9_\-]+)"', page).group(1)  # type: ignore[union-attr]
    key = ApiKey.objects.get(name="team-a")
    assert key.key_hash == hash_client_key(plain) and key.allowed_models == ["gpt-*"]
    assert key.max_concurrent_requests == 5
    assert key.key_hint == f"gw-…{plain[-4:]}"
    assert plain not in response.cookies.output()  # not parked in a message cookie either
    for url in ("/admin/accounts/apikey/", f"/admin/accounts/apikey/{key.pk}/change/"):
        later = text_of(staff.get(url))
        assert plain not in later and key.key_hint in later


def test_editing_a_client_key_keeps_its_hash(staff: Client) -> None:
    key = ApiKey(name="k")
    key.set_key("gw-existing-client-key")
    key.save()
    staff.post(f"/admin/accounts/apikey/{key.pk}/change/", {"name": "k2", "allowed_models": "[]"})
    key.refresh_from_db()
    assert key.name == "k2" and key.key_hash == hash_client_key("gw-existing-client-key") and not key.active


def test_usd_budgets_are_set_in_the_admin_and_a_negative_one_is_refused(staff: Client) -> None:
    key = ApiKey(name="spender")
    key.set_key("gw-spender-client-key")
    key.save()
    url = f"/admin/accounts/apikey/{key.pk}/change/"
    staff.post(url, {"name": "spender", "allowed_models": "[]", "active": "on", "usd_budget_day": "5",
                     "usd_budget_5h": "0.25"})
    key.refresh_from_db()
    assert key.usd_budget_day == Decimal("5") and key.usd_budget_5h == Decimal("0.25")
    assert key.usd_budget_week is None and key.usd_budget_month is None
    refused = staff.post(url, {"name": "spender", "allowed_models": "[]", "active": "on", "usd_budget_month": "-1"})
    assert refused.status_code == 200 and "greater than or equal to 0" in text_of(refused)
    key.refresh_from_db()
    assert key.usd_budget_month is None and key.usd_budget_day == Decimal("5")  # the refused form saved nothing


# ------------------------------------------------------------------ providers

def provider_form(provider: Provider, **changes: Any) -> dict[str, Any]:
    form = {"name": provider.name, "protocol": provider.protocol, "base_url": provider.base_url,
            "headers": "{}", "served_models": "[]", "selection": "lru", "connect_timeout": "10",
            "first_byte_timeout": "120", "idle_timeout": "120", "proxy_url": "", "accepts_thinking": "on",
            "accepts_cache_control": "on", "accepts_structured_output": "on", "accepts_adaptive_thinking": "on",
            "anthropic_version": "2023-06-01", "affinity": "on", "affinity_ttl": "300",
            "rules": json.dumps(provider.rules), "prices": "{}", "enabled": "on",
            "accounts-TOTAL_FORMS": "0", "accounts-INITIAL_FORMS": "0",
            "accounts-MIN_NUM_FORMS": "0", "accounts-MAX_NUM_FORMS": "1000"}
    form.update(changes)
    return form


@pytest.mark.parametrize("rules, problem", [
    ([{"name": "x", "status": [429], "action": "explode"}], "action must be return, retry or disable"),
    ([{"name": "x", "status": "429", "action": "retry"}], "status must be an integer or a list of integers"),
    ({"action": "retry"}, "rules must be a list of objects"),
    ([{"name": "x", "status": 403, "contains": "quota", "action": "retry"}], "contains must be a list of strings"),
    ([{"name": "x", "status": [401], "action": "disable", "retest_after": "hourly"}],
     "retest_after must be a number of seconds above 0"),
])
def test_provider_rule_editing_rejects_invalid_rules(staff: Client, rules: Any, problem: str) -> None:
    provider = make_provider()
    url = reverse("admin:accounts_provider_change", args=[provider.pk])
    response = staff.post(url, provider_form(provider, rules=json.dumps(rules)))
    assert response.status_code == 200 and problem in text_of(response)
    provider.refresh_from_db()
    assert provider.rules == Provider._meta.get_field("rules").get_default()


def test_provider_rules_and_prices_are_saved_when_valid(staff: Client) -> None:
    provider = make_provider()
    rules = [{"name": "quota", "status": [403], "contains": ["quota"], "action": "retry", "tier": "t2"}]
    prices = {"gpt-5-mini": {"input": 0.25, "output": 2}}
    url = reverse("admin:accounts_provider_change", args=[provider.pk])
    response = staff.post(url, provider_form(provider, rules=json.dumps(rules), prices=json.dumps(prices),
                                             auto_prefix="on"))
    assert response.status_code == 302, text_of(response)
    provider.refresh_from_db()
    assert provider.rules == rules and provider.prices == prices and provider.auto_prefix


def test_a_retest_schedule_edited_in_the_admin_is_what_the_next_disable_uses(staff: Client) -> None:
    from accounts import pool
    from accounts.rules import classify

    provider = make_provider()
    rules = [{"name": "revoked", "status": [401], "action": "disable", "tier": "auth", "retest_after": 90}]
    url = reverse("admin:accounts_provider_change", args=[provider.pk])
    assert staff.post(url, provider_form(provider, rules=json.dumps(rules))).status_code == 302
    provider.refresh_from_db()
    ruling = classify(provider.rules, 401, "")
    account = make_account(provider, "a", new_key())
    pool.disable_account(account.pk, rule=ruling.rule, tier=ruling.tier, status_code=401, excerpt="",
                         retest_after=ruling.retest_after)
    account.refresh_from_db()
    assert account.retest_interval == 90
    listing = text_of(staff.get(reverse("admin:accounts_account_changelist")))
    [cell] = re.findall(r'class="field-back_in_pool[^"]*">(.*?)</td>', listing)
    assert "Back in pool" in listing and cell == f"test {account.retest_at:%m-%d %H:%M:%S} UTC"


def test_provider_price_table_is_validated(staff: Client) -> None:
    provider = make_provider()
    url = reverse("admin:accounts_provider_change", args=[provider.pk])
    response = staff.post(url, provider_form(provider, prices=json.dumps({"m": {"input": -1, "outptu": 2}})))
    page = text_of(response)
    assert "m: unknown field(s) outptu" in page and "m: input must be a non-negative number" in page


def test_an_aliases_model_metadata_is_edited_in_the_admin_and_checked(staff: Client) -> None:
    provider = make_provider()
    url = reverse("admin:accounts_modelalias_add")
    form = {"name": "coder", "provider": str(provider.pk), "upstream_model": "gpt-5", "priority": "0"}
    bad = text_of(staff.post(url, {**form, "metadata": json.dumps({"context_window": "big", "created_at": "May"})}))
    assert "context_window&#x27; must be a whole number" in bad and "created_at&#x27; must be an RFC 3339 time" in bad
    assert not ModelAlias.objects.exists()
    meta = {"context_window": 128000, "base_instructions": "Be brief.", "supported_reasoning_levels": ["low"]}
    assert staff.post(url, {**form, "metadata": json.dumps(meta)}).status_code == 302
    assert ModelAlias.objects.get(name="coder").metadata == meta


def test_a_provider_with_500_accounts_links_to_them_and_still_saves(staff: Client) -> None:
    provider = make_provider()
    Account.objects.bulk_create([Account(provider=provider, label=f"a{i}", secret_encrypted="x")
                                 for i in range(500)])
    url = reverse("admin:accounts_provider_change", args=[provider.pk])
    page = text_of(staff.get(url))
    assert "accounts-0-label" not in page and "500 account(s)" in page
    form = provider_form(provider, idle_timeout="30")
    for k in [k for k in form if k.startswith("accounts-")]:
        del form[k]
    assert staff.post(url, form).status_code == 302
    provider.refresh_from_db()
    assert provider.idle_timeout == 30


# ------------------------------------------------------------------ lists

@pytest.mark.parametrize("source", ["dashboard.stats.used_since", ""])  # the usage buckets, or the log itself
def test_account_list_shows_todays_usage_for_the_page(staff: Client, source: str,
                                                      settings: Any) -> None:
    from dashboard import rollup

    settings.GATEWAY_ACCOUNT_USAGE_SINCE = source
    provider = make_provider()
    busy, idle = make_account(provider, "busy", new_key()), make_account(provider, "idle", new_key())
    now = timezone.now()
    rows = RequestLog.objects.bulk_create(
        [RequestLog(request_id=f"r{i}", client_protocol="openai_chat", status=200, account=busy,
                    created_at=now, input_tokens=10, output_tokens=5) for i in range(3)]
        + [RequestLog(request_id="old", client_protocol="openai_chat", status=200, account=busy,
                      created_at=now - dt.timedelta(days=2), input_tokens=1000, output_tokens=1000)])
    rollup.add(rows)  # what the log writer's sink does with each batch
    response = staff.get(ACCOUNTS_URL)
    listed = list(response.context["cl"].result_list)
    assert sorted((a.label, a.today_n, a.today_t) for a in listed) == [("busy", 3, 45), ("idle", 0, 0)]
    page = text_of(response)
    assert '<td class="field-today_requests">3</td>' in page and '<td class="field-today_tokens">45</td>' in page


def test_disable_event_list_filters_by_open_tier_status_and_provider(staff: Client) -> None:
    p1, p2 = make_provider(name="p1"), make_provider(name="p2")
    a1, a2, a3 = make_account(p1, "a1", new_key()), make_account(p1, "a2", new_key()), make_account(p2, "a3", new_key())
    pool.disable_account(a1.pk, rule="exhausted", tier="tier3_account_exhausted", status_code=429, excerpt="")
    pool.disable_account(a2.pk, rule="auth_invalid", tier="auth_invalid", status_code=401, excerpt="")
    pool.disable_account(a3.pk, rule="auth_invalid", tier="auth_invalid", status_code=401, excerpt="")
    pool.enable_account(a2.pk, how="hand")

    def listed(**query: str) -> set[str]:
        response = staff.get("/admin/accounts/disableevent/", query)
        assert response.status_code == 200
        return {e.account.label for e in response.context["cl"].result_list}

    assert listed() == {"a1", "a2", "a3"}
    assert listed(ended_at__isempty="1") == {"a1", "a3"}
    assert listed(ended_at__isempty="0") == {"a2"}
    assert listed(tier__exact="auth_invalid") == {"a2", "a3"}
    assert listed(status_code__exact="429") == {"a1"}
    assert listed(ended_by__exact="hand") == {"a2"}
    assert listed(account__provider__id__exact=str(p2.pk)) == {"a3"}
    assert listed(q="a1") == {"a1"}
    assert staff.get("/admin/accounts/disableevent/add/").status_code == 403


def test_anonymous_users_are_sent_to_the_login_page(client: Client) -> None:
    for url in (ACCOUNTS_URL, IMPORT_URL, "/admin/accounts/disableevent/", "/admin/accounts/apikey/add/"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/")


def test_the_request_log_list_finds_a_request_by_its_exact_id_or_model_and_counts_only_so_far(
        staff: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    from accounts.admin import CappedPaginator

    RequestLog.objects.bulk_create([RequestLog(request_id=f"req_{i:04d}",
                                               client_protocol="anthropic" if i == 3 else "openai_chat",
                                               model_requested="gpt-rare" if i == 7 else "gpt-common",
                                               status=429 if i == 5 else 502 if i == 6 else 200)
                                    for i in range(30)])
    url = "/admin/accounts/requestlog/"
    found = staff.get(url, {"q": "req_0012"}).content.decode()
    assert "req_0012" in found and "req_0011" not in found and "1 request log" in found
    by_model = staff.get(url, {"q": "gpt-rare"}).content.decode()
    assert "req_0007" in by_model and "req_0008" not in by_model
    assert "0 results" in staff.get(url, {"q": "req_001"}).content.decode()  # exact, not a substring scan
    # The filters' options are fixed (no scan of the log for its distinct values) and they filter.
    limited = staff.get(url, {"status": "429"}).content.decode()
    assert "req_0005" in limited and "req_0006" not in limited and "req_0004" not in limited
    failed = staff.get(url, {"status": "5xx"}).content.decode()
    assert "req_0006" in failed and "req_0005" not in failed
    anthropic = staff.get(url, {"client_protocol": "anthropic"}).content.decode()
    assert "req_0003" in anthropic and "req_0004" not in anthropic
    monkeypatch.setattr(CappedPaginator, "CAP", 20)
    capped = staff.get(url).content.decode()
    assert "20 request logs" in capped  # the count stops at the cap: no full count of a big log


def test_the_provider_form_refuses_a_selection_it_does_not_know(staff: Client) -> None:
    provider = make_provider()
    url = reverse("admin:accounts_provider_change", args=[provider.pk])
    refused = staff.post(url, provider_form(provider, selection="sticky"))
    assert refused.status_code == 200 and "Select a valid choice" in text_of(refused)
    saved = staff.post(url, provider_form(provider, selection="weighted", affinity_ttl="3600"))
    assert saved.status_code == 302, text_of(saved)
    provider.refresh_from_db()
    assert provider.selection == "weighted" and provider.affinity_ttl == 3600
