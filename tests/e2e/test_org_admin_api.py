"""The organization admin API from outside (httpx): spend limits in Anthropic's shape set, listed and
removed with admin keys, each change audited, enforced on the developer's next request; the cost report."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from typing import Any

import anthropic
import httpx
import pytest
from django.contrib.auth import get_user_model

from accounts.config_file import load
from accounts.models import AdminAuditEvent, AdminKey, ApiKey, Team
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, seen

pytestmark = pytest.mark.django_db(transaction=True)

LIMITS = "/v1/organizations/spend_limits"
COST = "/v1/organizations/analytics/cost"
PRICES = {"mock-*": {"input": 1000, "output": 1000}}  # $0.007 an answer
HI = [{"role": "user", "content": "hi"}]


def admin_key(scope: str) -> tuple[str, str]:
    """(plain key, name) of a new admin key with ``scope``."""

    plain, name = f"gw-admin-{uuid.uuid4().hex}", f"{scope}-{uuid.uuid4().hex[:6]}"
    key = AdminKey(name=name, scope=scope)
    key.set_key(plain)
    key.save()
    return plain, name


@pytest.fixture
def org(pool: Any, mock_upstream: Server, gateway: Server) -> dict[str, Any]:
    load(pool_config(mock_upstream, prices=PRICES))
    tag = uuid.uuid4().hex[:6]
    user = get_user_model().objects.create_user(f"alice-{tag}", email=f"alice-{tag}@corp.example")
    team = Team.objects.create(name=f"platform-{tag}")
    plain = f"gw-dev-{uuid.uuid4().hex}"
    key = ApiKey(name=f"alice-{tag}", user=user, team=team)
    key.set_key(plain)
    key.save()
    seen(gateway)
    return {"user": user.username, "team": team.name, "key": plain, "key_row": key}


def call(gateway: Server, method: str, path: str, key: str | None, **kw: Any) -> httpx.Response:
    headers = {"x-api-key": key} if key else {}
    return httpx.request(method, gateway.url + path, headers=headers, timeout=30, **kw)


def test_admin_keys_are_required_and_a_read_key_may_not_write(org: dict[str, Any], gateway: Server) -> None:
    reader, _ = admin_key(AdminKey.READ)
    for key in (None, CLIENT_KEY, org["key"], "gw-admin-never-issued"):
        refused = call(gateway, "GET", LIMITS, key)
        assert refused.status_code == 401 and refused.headers["x-should-retry"] == "false"
        assert refused.json()["error"]["type"] == "authentication_error"
    assert call(gateway, "GET", LIMITS, reader).status_code == 200
    body = {"scope": {"type": "user", "user_id": org["user"]}, "amount": "500", "period": "daily"}
    denied = call(gateway, "POST", LIMITS, reader, json=body)
    assert denied.status_code == 403
    assert denied.json() == {"type": "error", "error": {"type": "permission_error",
                                                       "message": "requires write:spend_limits: this admin key may "
                                                                  "only read"}}
    assert ApiKey.objects.get(pk=org["key_row"].pk).usd_budget_day is None
    assert not AdminAuditEvent.objects.exists()


def test_caps_are_set_listed_read_and_removed_each_change_audited(org: dict[str, Any], gateway: Server) -> None:
    writer, writer_name = admin_key(AdminKey.WRITE)
    user_cap = call(gateway, "POST", LIMITS, writer, json={
        "scope": {"type": "user", "user_id": org["user"]}, "amount": "500", "period": "daily"})
    assert user_cap.status_code == 200, user_cap.text
    made = user_cap.json()
    assert {k: made[k] for k in ("type", "scope", "amount", "currency", "period")} == {
        "type": "spend_limit", "scope": {"type": "user", "user_id": org["user"]}, "amount": "500",
        "currency": "USD", "period": "daily"}
    assert ApiKey.objects.get(pk=org["key_row"].pk).usd_budget_day == 5  # the developer's own key: $5.00 a day
    team_cap = call(gateway, "POST", LIMITS, writer, json={
        "scope": {"type": "rbac_group", "rbac_group_id": org["team"]}, "amount": 250000})  # monthly by default
    assert team_cap.status_code == 200 and team_cap.json()["period"] == "monthly"
    assert Team.objects.get(name=org["team"]).usd_budget_month == 2500
    # Setting it again replaces it (one cap per scope and period), with the amount before in the audit row.
    again = call(gateway, "POST", LIMITS, writer, json={
        "scope": {"type": "user", "user_id": org["user"]}, "amount": "750", "period": "daily"})
    assert again.json()["id"] == made["id"] and again.json()["amount"] == "750"

    listed = call(gateway, "GET", LIMITS, writer).json()
    assert [row["id"] for row in listed["data"]] == [made["id"], team_cap.json()["id"]]
    assert listed["has_more"] is False and listed["first_id"] == made["id"]
    users_only = call(gateway, "GET", LIMITS, writer, params={"scope_type": "user", "limit": 1}).json()
    assert [row["id"] for row in users_only["data"]] == [made["id"]]
    assert call(gateway, "GET", f"{LIMITS}/{made['id']}", writer).json()["amount"] == "750"

    removed = call(gateway, "DELETE", f"{LIMITS}/{made['id']}", writer)
    assert removed.json() == {"type": "spend_limit_deleted", "id": made["id"]}
    assert ApiKey.objects.get(pk=org["key_row"].pk).usd_budget_day is None
    assert call(gateway, "GET", f"{LIMITS}/{made['id']}", writer).status_code == 404
    assert call(gateway, "DELETE", f"{LIMITS}/{made['id']}", writer).status_code == 404

    trail = list(AdminAuditEvent.objects.order_by("id").values_list("actor", "action", "target", "before", "after"))
    actor = f"admin-key:{writer_name}"
    user_scope = {"scope": {"type": "user", "user_id": org["user"]}, "period": "daily", "currency": "USD"}
    assert trail == [
        (actor, "spend_limit.upsert", made["id"], None, {**user_scope, "amount": "500"}),
        (actor, "spend_limit.upsert", team_cap.json()["id"], None,
         {"scope": {"type": "rbac_group", "rbac_group_id": org["team"]}, "period": "monthly", "currency": "USD",
          "amount": "250000"}),
        (actor, "spend_limit.upsert", made["id"], {**user_scope, "amount": "500"}, {**user_scope, "amount": "750"}),
        (actor, "spend_limit.delete", made["id"], {**user_scope, "amount": "750"}, None),
    ]


@pytest.mark.parametrize(("body", "message"), [
    ({"scope": {"type": "user", "user_id": "nobody-here"}, "amount": "5"}, "scope.user_id: no user named"),
    ({"scope": {"type": "organization"}, "amount": "5"}, "organization-wide limit is not supported"),
    ({"scope": {"type": "user", "user_id": "x"}, "amount": "5.5"}, "amount: must be a whole-number"),
    ({"scope": {"type": "user", "user_id": "x"}, "amount": "5", "period": "hourly"}, "period: must be one of"),
    ({"scope": {"type": "user", "user_id": "x"}}, "amount: Required"),
    ({"amount": "5"}, "scope: Required"),
])
def test_bad_input_is_a_400_naming_the_field(org: dict[str, Any], gateway: Server, body: dict[str, Any],
                                             message: str) -> None:
    writer, _ = admin_key(AdminKey.WRITE)
    refused = call(gateway, "POST", LIMITS, writer, json=body)
    assert refused.status_code == 400 and refused.json()["error"]["type"] == "invalid_request_error"
    assert message in refused.json()["error"]["message"]
    assert not AdminAuditEvent.objects.exists()


def test_a_cap_set_through_the_api_is_enforced_and_its_spend_reported(org: dict[str, Any], gateway: Server) -> None:
    writer, _ = admin_key(AdminKey.WRITE)
    reader, _ = admin_key(AdminKey.READ)
    assert call(gateway, "POST", LIMITS, writer, json={
        "scope": {"type": "user", "user_id": org["user"]}, "amount": "1", "period": "weekly"}).status_code == 200
    seen(gateway)
    client = anthropic.Anthropic(base_url=gateway.url, api_key=org["key"], max_retries=0)
    served = 0
    with pytest.raises(anthropic.RateLimitError) as refused:
        for _ in range(5):
            client.messages.create(model="up-anthropic/mock-text", max_tokens=20, messages=HI)
            served += 1
    assert served == 2  # $0.007, then $0.014 crosses the cent
    assert refused.value.response.headers["anthropic-ratelimit-unified-overage-period"] == "weekly"
    today = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT00:00:00Z")
    deadline = time.monotonic() + 10
    while True:  # the log is written a batch after the answers
        report = call(gateway, "GET", COST, reader, params={"starting_at": today, "group_by[]": ["actor",
                                                                                              "rbac_group_id"],
                                                            "actor_ids[]": org["user"]})
        assert report.status_code == 200, report.text
        if report.json()["data"] and report.json()["data"][0]["cost"]["requests"] == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    [row] = report.json()["data"]
    assert row["group"]["actor"]["user_id"] == org["user"] and row["group"]["rbac_group_id"] == org["team"]
    assert row["cost"] == {"currency": "USD", "amount": "1.4", "list_amount": "1.4", "requests": 2}
    assert call(gateway, "GET", COST, reader, params={"ending_at": today}).status_code == 400  # starting_at: required
