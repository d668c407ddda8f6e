"""Teams from outside: a team's USD budget is spent by all of its keys together (one key spends it, the
team's other key is refused, a key of no team is not), its allowed models narrow each key's, and
its spend is on the dashboard and in the CSV exports; the alert of a team's budget names the team."""

from __future__ import annotations

import csv
import io
import time
import uuid
from decimal import Decimal
from typing import Any

import httpx
import pytest

from accounts.config_file import load
from accounts.models import ApiKey, RequestLog, Team
from alerts.models import Webhook
from tests.e2e.conftest import pool_config
from tests.e2e.keyadmin import chat, message
from tests.e2e.test_alerts import Receiver, alerting, receiver  # noqa: F401 - fixtures
from tests.e2e.test_changes_take_effect import staff_session
from tests.servers import Server, seen

pytestmark = pytest.mark.django_db(transaction=True)

# $1000 per million tokens: each scripted answer (~7 tokens) costs about $0.007.
PRICES = {"mock-*": {"input": 1000, "output": 1000}}


def team_with_keys(mock: Server, gateway: Server, count: int, **team_fields: Any) -> tuple[Team, list[str]]:
    """A team of ``count`` new keys (and the pool, priced); returns the team and the keys' secrets."""

    tag = uuid.uuid4().hex[:8]
    team = Team.objects.create(name=f"team-{tag}", **team_fields)
    plains = [f"gw-team-{tag}-{i}" for i in range(count)]
    config = pool_config(mock, prices=PRICES)
    config["client_keys"] += [{"name": f"{team.name}-{i}", "key": p} for i, p in enumerate(plains)]
    load(config)
    ApiKey.objects.filter(name__startswith=f"{team.name}-").update(team=team)
    for key in ApiKey.objects.filter(team=team):
        key.save()  # through save: the configuration's version moves (update() alone would not)
    seen(gateway)
    return team, plains


def outsider(gateway: Server) -> str:
    plain = f"gw-no-team-{uuid.uuid4().hex}"
    load({"client_keys": [{"name": plain[-14:], "key": plain}]})
    seen(gateway)
    return plain


def test_a_team_budget_spent_by_one_key_refuses_the_teams_other_key(
        pool: Any, gateway: Server, mock_upstream: Server) -> None:
    team, (first, second) = team_with_keys(mock_upstream, gateway, 2, usd_budget_day=Decimal("0.005"))
    alone = outsider(gateway)
    assert chat(gateway, first)[0] == 200  # ~$0.007: the request that crosses the budget is served
    status, said = chat(gateway, second)
    assert status == 429
    assert said.startswith("Your team's shared 24-hour USD budget of $0.005 is used up ($0.0")
    # Claude Code's words for a group's cap: the team's pool, not the user's own.
    status, said, response = message(gateway, second)
    assert status == 429 and said.startswith("billing_error: Your team's shared 24-hour USD budget")
    assert response.headers["anthropic-ratelimit-unified-overage-scope"] == "group_pool"
    assert chat(gateway, first)[0] == 429  # the key that spent it too
    assert chat(gateway, alone)[0] == 200  # a key of no team is not held by it
    # Raised in the admin (a save of the team): its keys are served again from the next request.
    team.usd_budget_day = Decimal("10")
    team.save()
    assert chat(gateway, second)[0] == 200


def test_a_teams_allowed_models_narrow_each_keys_with_the_usual_refusal(
        pool: Any, gateway: Server, mock_upstream: Server) -> None:
    team, (plain,) = team_with_keys(mock_upstream, gateway, 1,
                                    allowed_models=["up-openai_chat/mock-text", "up-anthropic/mock-text"])
    assert chat(gateway, plain)[0] == 200 and message(gateway, plain)[0] == 200
    status, said = chat(gateway, plain, "up-openai_chat/mock-tool")
    assert (status, said) == (403, "This API key's team is not allowed to use the model 'up-openai_chat/mock-tool'")
    status, said, _ = message(gateway, plain, "up-anthropic/mock-tool")  # Anthropic's table: 400
    assert (status, said) == (400, "invalid_request_error: This API key's team is not allowed to use the model "
                                   "'up-anthropic/mock-tool'")
    # The key's own list and the team's are both applied: what neither allows alone is refused.
    key = ApiKey.objects.get(team=team)
    key.allowed_models = ["up-openai_chat/mock-tool"]
    key.save()
    assert chat(gateway, plain)[0] == 403 and chat(gateway, plain, "up-openai_chat/mock-tool")[0] == 403
    # A deactivated team: its keys are refused like revoked ones, and the refusals name the key.
    key.allowed_models = []
    key.save()
    team.active = False
    team.save()
    assert chat(gateway, plain)[0] == 401


def test_the_dashboard_and_the_csvs_show_each_teams_spend(pool: Any, gateway: Server, mock_upstream: Server) -> None:
    team, (first, second) = team_with_keys(mock_upstream, gateway, 2, usd_budget_month=Decimal("100"))
    alone = outsider(gateway)
    for plain in (first, first, second, alone):
        assert chat(gateway, plain)[0] == 200
    keys = list(ApiKey.objects.filter(team=team))
    deadline = time.monotonic() + 10
    while RequestLog.objects.filter(client_key__in=keys, cost__gt=0).count() < 3:
        assert time.monotonic() < deadline, "the team's requests were never logged"
        time.sleep(0.05)
    spent = sum((r.cost for r in RequestLog.objects.filter(client_key__in=keys)), Decimal(0))
    assert spent > 0

    dashboard = httpx.Client(base_url=gateway.url, cookies=staff_session(), timeout=10.0)
    by_team = {r["team"]: r for r in csv.DictReader(io.StringIO(dashboard.get("/dashboard/spend.csv?by=team&window=1h").text))}
    assert by_team[team.name]["requests"] == "3" and by_team[team.name]["keys"] == "2"
    assert Decimal(by_team[team.name]["cost_usd"]) == spent
    by_key = {r["key"]: r for r in csv.DictReader(io.StringIO(dashboard.get("/dashboard/spend.csv?by=key&window=1h").text))}
    assert {by_key[k.name]["team"] for k in keys} == {team.name}
    assert by_key[alone[-14:]]["team"] == ""
    logged = dashboard.get("/dashboard/requests.csv").text
    rows = list(csv.DictReader(io.StringIO(logged)))
    assert {r["team"] for r in rows if r["client_key"] in {k.name for k in keys}} == {team.name}
    assert first not in logged and second not in logged

    page = dashboard.get("/dashboard/keys/?window=1h").text
    row = page[page.index(f'data-team-id="{team.pk}"'):]
    row = row[:row.index("</tr>")]
    assert team.name in row and "$100.00" in row and 'data-field="requests">3<' in row
    dashboard.close()


def test_a_team_budget_reached_is_alerted_naming_the_team(alerting: Server, mock_upstream: Server,  # noqa: F811
                                                          receiver: Receiver) -> None:  # noqa: F811
    Webhook.objects.create(name="teams", url=receiver.url, on_account_disabled=False, on_provider_low=False)
    team, (first, second) = team_with_keys(mock_upstream, alerting, 2, usd_budget_day=Decimal("0.005"))
    assert chat(alerting, first)[0] == 200 and chat(alerting, second)[0] == 429
    [alert] = receiver.wait_for(1)
    assert (alert["event"], alert["team"], alert["client_key"], alert["limit"]) == (
        "budget_reached", team.name, f"{team.name}-1", "$0.005")
    assert alert["text"] == (f"Team {team.name} reached its budget of $0.005 in the last 24 hours "
                             f"(refused client key {team.name}-1).")
