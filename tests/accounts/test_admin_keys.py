"""The admin of client keys and teams, driven as a logged-in staff user would (Django's test client):
rotation's form and its one-time reveal, bulk (de)activation with its version bump, and a team's
budgets, allowed models and keys."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone

from accounts import configversion
from accounts.models import ApiKey, Team
from accounts.secrets import hash_client_key

pytestmark = pytest.mark.django_db

KEYS = "/admin/accounts/apikey/"
TEAMS = "/admin/accounts/team/"


@pytest.fixture
def staff(client: Client) -> Client:
    user = User.objects.create(username="ops", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="accounts"))
    client.force_login(user)
    return client


def make_key(name: str, plain: str, **fields: object) -> ApiKey:
    key = ApiKey(name=name, **fields)
    key.set_key(plain)
    key.save()
    return key


def text_of(response: object) -> str:
    return response.content.decode()  # type: ignore[attr-defined]


def test_rotating_asks_for_the_grace_then_shows_each_new_secret_once_with_a_copy_button(staff: Client) -> None:
    a = make_key("rot-a", "gw-rotate-me-aaaaaaaa", allowed_models=["gpt-*"], rate_limit_per_minute=7)
    b = make_key("rot-b", "gw-rotate-me-bbbbbbbb")
    asked = staff.post(KEYS, {"action": "rotate_keys", "_selected_action": [a.pk, b.pk], "index": "0"})
    form = text_of(asked)
    assert asked.status_code == 200 and 'name="grace_hours"' in form and "rot-a" in form and "rot-b" in form
    refused = staff.post(KEYS, {"action": "rotate_keys", "_selected_action": [a.pk], "apply": "1",
                                "grace_hours": "-1"})
    assert "greater than or equal to 0" in text_of(refused)
    a.refresh_from_db()
    assert a.key_hash == hash_client_key("gw-rotate-me-aaaaaaaa") and not a.previous_key_hash  # nothing rotated

    before = timezone.now()
    shown = staff.post(KEYS, {"action": "rotate_keys", "_selected_action": [a.pk, b.pk], "apply": "1",
                              "grace_hours": "0.5"})
    page = text_of(shown)
    assert "no-store" in shown.headers.get("Cache-Control", "")
    secrets = re.findall(r'value="(gw-[A-Za-z0-9_\-]+)"', page)
    assert len(secrets) == 2 and page.count('class="button copy-key"') == 2 and "accounts/copy.js" in page
    for key, old, new in ((a, "gw-rotate-me-aaaaaaaa", secrets[0]), (b, "gw-rotate-me-bbbbbbbb", secrets[1])):
        key.refresh_from_db()
        assert key.key_hash == hash_client_key(new) and key.previous_key_hash == hash_client_key(old)
        assert key.previous_key_until is not None
        grace = key.previous_key_until - before
        assert dt.timedelta(minutes=29) < grace <= dt.timedelta(minutes=30, seconds=5)
    a.refresh_from_db()
    assert (a.allowed_models, a.rate_limit_per_minute, a.name) == (["gpt-*"], 7, "rot-a")  # the same settings
    for url in (KEYS, f"{KEYS}{a.pk}/change/"):
        later = text_of(staff.get(url))
        assert not any(s in later for s in secrets)
    change = text_of(staff.get(f"{KEYS}{a.pk}/change/"))
    assert "Rotation" in change and a.previous_key_hint in change and 'name="previous_key_until_0"' in change


def test_the_copy_script_is_served_as_a_static_file(staff: Client) -> None:
    from django.contrib.staticfiles import finders

    found = finders.find("accounts/copy.js")
    assert found and "navigator.clipboard.writeText" in open(found).read()  # noqa: SIM115


def test_bulk_deactivation_is_one_update_and_one_bump(staff: Client) -> None:
    keys = [make_key(f"bulk-{i}", f"gw-bulk-key-{i}-xxxxxxxx") for i in range(3)]
    version = configversion.read()
    answer = staff.post(KEYS, {"action": "deactivate_keys", "_selected_action": [k.pk for k in keys[:2]],
                               "index": "0"}, follow=True)
    assert "Deactivated 2 key(s)" in text_of(answer)
    assert [k.active for k in ApiKey.objects.filter(name__startswith="bulk-").order_by("name")] == [False, False, True]
    assert configversion.read() > version
    version = configversion.read()
    staff.post(KEYS, {"action": "deactivate_keys", "_selected_action": [keys[0].pk], "index": "0"})
    assert configversion.read() == version  # nothing changed, nothing to tell the gateways
    staff.post(KEYS, {"action": "activate_keys", "_selected_action": [keys[0].pk], "index": "0"})
    assert ApiKey.objects.get(pk=keys[0].pk).active and configversion.read() > version


def test_a_key_gets_an_expiry_and_a_team_in_its_form(staff: Client) -> None:
    team = Team.objects.create(name="platform")
    key = make_key("expiring", "gw-expiring-key-xxxxxxxx")
    staff.post(f"{KEYS}{key.pk}/change/", {"name": "expiring", "allowed_models": "[]", "active": "on",
                                          "team": team.pk, "expires_at_0": "2031-01-02", "expires_at_1": "03:04:05"})
    key.refresh_from_db()
    assert key.team == team and key.expires_at is not None
    assert timezone.localtime(key.expires_at).strftime("%Y-%m-%d %H:%M:%S") == "2031-01-02 03:04:05"
    listing = text_of(staff.get(KEYS))
    assert "platform" in listing and "01-02 03:04:05" in listing


def test_a_team_is_made_with_budgets_and_allowed_models_and_lists_its_keys(staff: Client) -> None:
    made = staff.post(f"{TEAMS}add/", {"name": "research", "active": "on", "allowed_models": '["claude-*"]',
                                       "usd_budget_day": "5", "usd_budget_month": "100", "idp_group": ""})
    assert made.status_code == 302, text_of(made)[:2000]
    team = Team.objects.get(name="research")
    assert team.allowed_models == ["claude-*"] and team.usd_budget_day == Decimal("5")
    make_key("r-1", "gw-research-one-xxxxxxxx", team=team)
    make_key("r-2", "gw-research-two-xxxxxxxx", team=team, active=False)
    make_key("elsewhere", "gw-elsewhere-key-xxxxxxx")
    page = text_of(staff.get(f"{TEAMS}{team.pk}/change/"))
    assert "r-1" in page and "r-2" in page and "elsewhere" not in page and "2 key(s)" in page
    assert "gw-research" not in page  # hints only: gw-…xxxx
    listing = text_of(staff.get(TEAMS))
    assert "research" in listing and "day $5.00" in listing and "month $100.00" in listing and "claude-*" in listing

    refused = staff.post(f"{TEAMS}{team.pk}/change/", {"name": "research", "allowed_models": '"claude-*"',
                                                       "usd_budget_week": "-1"})
    text = text_of(refused)
    assert "allowed models must be a list" in text and "greater than or equal to 0" in text
    team.refresh_from_db()
    assert team.usd_budget_week is None
