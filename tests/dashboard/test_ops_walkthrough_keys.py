"""An ops engineer's round with client keys in headless Chromium, against a real gateway and the
scripted upstream: revoke a key in the admin and see its next request refused, rotate a key (the new
secret copied from its one-time page, both secrets served during the grace), and give two keys a team
whose budget, spent by one, refuses the other, as the keys page then shows. Each step leaves a
screenshot under ``artifacts/walkthrough-keys/`` for a person to look at.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User

from accounts.config_file import load
from accounts.models import ApiKey, RequestLog, Team
from tests.dashboard.conftest import PASSWORD
from tests.dashboard.test_browser import WAIT_MS, browser, log_in  # noqa: F401 - the browser fixture
from tests.dashboard.test_ops_walkthrough import until
from tests.e2e.conftest import pool_config
from tests.e2e.keyadmin import chat
from tests.servers import ROOT, Server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SHOTS = ROOT / "artifacts" / "walkthrough-keys"
# USD per million tokens: each scripted answer (~7 tokens) costs about $0.007.
PRICES = {"mock-*": {"input": 1000, "output": 1000}}


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)




def run_action(page: Any, base: str, keys: list[ApiKey], action: str) -> None:
    """In the key list: tick ``keys``, choose ``action``, Go."""

    page.goto(f"{base}/admin/accounts/apikey/")
    for key in keys:
        page.check(f'input[name="_selected_action"][value="{key.pk}"]')
    page.select_option('select[name="action"]', action)
    page.get_by_role("button", name="Go").click()


def test_ops_revoke_rotate_and_hold_a_team_to_its_budget(browser: Any, gateway: Server,  # noqa: F811
                                                       mock_upstream: Server) -> None:
    expect = pytest.importorskip("playwright.sync_api").expect
    User.objects.create_superuser("ops", "ops@example.com", PASSWORD)
    tag = uuid.uuid4().hex[:8]
    secrets = {name: f"gw-walk-{name}-{tag}" for name in ("leaver", "rotated", "builder", "tester")}
    config = pool_config(mock_upstream, prices=PRICES)
    config["client_keys"] += [{"name": name, "key": plain} for name, plain in secrets.items()]
    load(config)
    leaver, rotated, builder, tester = (ApiKey.objects.get(name=name) for name in secrets)
    base = gateway.url
    assert chat(gateway, secrets["leaver"])[0] == 200 and chat(gateway, secrets["rotated"])[0] == 200

    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    errors: list[str] = []
    context.on("weberror", lambda e: errors.append(str(e.error)))
    page = context.new_page()
    log_in(page, base)

    # 1. A developer left: their key is revoked in the admin, and its very next request is refused.
    run_action(page, base, [leaver], "deactivate_keys")
    expect(page.locator(".messagelist")).to_contain_text("Deactivated 1 key(s)")
    shot(page, "1-key-revoked")
    assert chat(gateway, secrets["leaver"])[0] == 401
    refused = until(lambda: RequestLog.objects.filter(client_key=leaver, status=401).first(), 10,
                    "the refusal logged under the key")
    assert refused.client_key_name == "leaver"

    # 2. A key is rotated with an hour's grace: the new secret is copied from its one-time page, and
    #    the clients still on the old one are served meanwhile.
    run_action(page, base, [rotated], "rotate_keys")
    page.fill("#id_grace_hours", "1")
    shot(page, "2-rotate-form")
    page.get_by_role("button", name="Rotate").click()
    field = page.locator("input.new-client-key")
    expect(field).to_have_count(1)
    new = field.input_value()
    assert new.startswith("gw-") and new != secrets["rotated"]
    page.get_by_role("button", name="Copy").click()
    expect(page.locator(".copy-done")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == new
    expect(page.locator("body")).to_contain_text("keeps working until")
    shot(page, "3-key-rotated")
    assert chat(gateway, new)[0] == 200 and chat(gateway, secrets["rotated"])[0] == 200

    # 3. A team with a $0.005 daily budget, made in the admin, with two new keys put in it there (a key's
    #    spending in the windows goes with it into a team: these have spent nothing yet).
    page.goto(f"{base}/admin/accounts/team/add/")
    page.fill("#id_name", f"platform-{tag}")
    page.fill("#id_usd_budget_day", "0.005")
    page.get_by_role("button", name="Save", exact=True).click()
    team = until(lambda: Team.objects.filter(name=f"platform-{tag}").first(), 5, "the team saved")
    for key in (builder, tester):
        page.goto(f"{base}/admin/accounts/apikey/{key.pk}/change/")
        page.select_option("#id_team", str(team.pk))
        page.get_by_role("button", name="Save", exact=True).click()
        expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    page.goto(f"{base}/admin/accounts/team/{team.pk}/change/")
    expect(page.locator("body")).to_contain_text("builder")
    shot(page, "4-team")

    # One key spends the team's budget; the team's other key is refused with the team named.
    assert chat(gateway, secrets["builder"])[0] == 200
    status, said = chat(gateway, secrets["tester"])
    assert status == 429 and said.startswith("Your team's shared 24-hour USD budget of $0.005 is used up")
    until(lambda: RequestLog.objects.filter(client_key=builder, cost__gt=0).exists(), 10, "the spending logged")

    # The keys page: the team's row, its budget spent (marked), what its keys spent together.
    page.goto(f"{base}/dashboard/keys/?window=1h")
    row = page.locator(f'tr[data-team-id="{team.pk}"]')
    expect(row.locator('[data-field="keys"]')).to_have_text("2")
    expect(row.locator('[data-field="budgets"] .err')).to_contain_text("of $0.005 in the last 24 hours")
    assert re.fullmatch(r"\$0\.0\d+", row.locator('[data-field="cost"]').inner_text())
    row.scroll_into_view_if_needed()
    shot(page, "5-team-over-budget")
    assert errors == []
    context.close()
