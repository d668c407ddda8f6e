"""``GET /managed/settings`` through a real gateway (the wrapper, the checksum the client computes,
the ETag, 304 only on a matching If-None-Match, 404 without a policy, ``If-None-Match: *``), and the
hint headers a client sends recorded per request and per developer, stale and unknown flagged."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from typing import Any

import httpx
import pytest

from accounts.models import ApiKey, RequestLog, Team
from signin import checksum, managed
from signin.models import ClientReport, ManagedSettings
from tests.servers import Server
from tests.signin import web
from tests.signin.conftest import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)

POLICY = {"permissions": {"deny": ["WebFetch"], "allow": ["Bash(ls:*)"]},
          "env": {"CLAUDE_CODE_GATEWAY_HINT_HEADERS": "1", "NOTE": "café 1.0"}, "cleanupPeriodDays": 30}
# What the client computes: keys sorted at every level, no whitespace (written out by hand here).
CANONICAL = ('{"cleanupPeriodDays":30,"env":{"CLAUDE_CODE_GATEWAY_HINT_HEADERS":"1","NOTE":"café 1.0"},'
             '"permissions":{"allow":["Bash(ls:*)"],"deny":["WebFetch"]}}')
CHECKSUM = "sha256:" + hashlib.sha256(CANONICAL.encode()).hexdigest()


@pytest.fixture
def bearer(pool: Any, gateway: Server, developer: Any) -> str:
    browser = web.Browser(gateway.url)
    browser.login("alice", PASSWORD)
    tokens = web.signed_in(gateway.url, browser)
    browser.close()
    token: str = tokens["access_token"]
    return token


def fetch(url: str, bearer: str, **headers: str) -> httpx.Response:
    return httpx.get(url + "/managed/settings", headers={"Authorization": f"Bearer {bearer}", **headers})


def test_no_policy_is_a_404(gateway: Server, bearer: str) -> None:
    resp = fetch(gateway.url, bearer)
    assert resp.status_code == 404
    assert fetch(gateway.url, bearer, **{"If-None-Match": "*"}).status_code == 404


def test_the_default_policy_is_served_in_the_wrapper_with_the_clients_checksum(gateway: Server, bearer: str) -> None:
    policy = ManagedSettings.objects.create(settings=POLICY)
    assert policy.checksum == CHECKSUM
    resp = fetch(gateway.url, bearer)
    assert resp.status_code == 200
    assert resp.json() == {"uuid": policy.uuid, "checksum": CHECKSUM, "settings": POLICY}
    assert resp.headers["etag"] == f'"{CHECKSUM}"'
    # Not the pair that would tell Claude Desktop a 304 means "settings that must not be missing".
    assert not ("x-cc-gateway-version" in resp.headers and resp.headers.get("cache-control") == "no-store")


def test_304_only_for_a_matching_if_none_match(gateway: Server, bearer: str) -> None:
    ManagedSettings.objects.create(settings=POLICY)
    same = fetch(gateway.url, bearer, **{"If-None-Match": f'"{CHECKSUM}"'})
    assert same.status_code == 304 and same.content == b"" and same.headers["etag"] == f'"{CHECKSUM}"'
    other = fetch(gateway.url, bearer, **{"If-None-Match": '"sha256:0000"'})
    assert other.status_code == 200 and other.json()["checksum"] == CHECKSUM
    # The probe answers as if the header were absent: the body, never a 304.
    star = fetch(gateway.url, bearer, **{"If-None-Match": "*"})
    assert star.status_code == 200 and star.json()["checksum"] == CHECKSUM


def test_an_empty_policy_is_a_200_with_empty_settings(gateway: Server, bearer: str) -> None:
    ManagedSettings.objects.create(settings={})
    resp = fetch(gateway.url, bearer)
    assert resp.status_code == 200 and resp.json()["settings"] == {}
    assert resp.json()["checksum"] == "sha256:" + hashlib.sha256(b"{}").hexdigest()


def test_a_teams_own_policy_wins_over_the_default(gateway: Server, bearer: str, developer: Any) -> None:
    ManagedSettings.objects.create(settings=POLICY)
    team = Team.objects.create(name="data")
    own = ManagedSettings.objects.create(team=team, settings={"model": "claude-sonnet-4-5"})
    ApiKey.objects.filter(user=developer).update(team=team)
    assert fetch(gateway.url, bearer).json() == {"uuid": own.uuid, "checksum": own.checksum,
                                                 "settings": {"model": "claude-sonnet-4-5"}}


def test_without_a_credential_it_is_a_401(gateway: Server) -> None:
    resp = httpx.get(gateway.url + "/managed/settings")
    assert resp.status_code == 401 and resp.json()["error"]["type"] == "authentication_error"


def test_hint_headers_are_recorded_and_each_developers_client_is_judged(
        gateway: Server, bearer: str, developer: Any) -> None:
    policy = ManagedSettings.objects.create(settings=POLICY)
    old_checksum = policy.checksum
    policy.settings = {**POLICY, "cleanupPeriodDays": 7}  # ops edit the policy: the old checksum goes stale
    policy.save()
    model = f"up-anthropic/mock-text-{uuid.uuid4().hex[:8]}"
    resp = httpx.post(gateway.url + "/v1/messages", headers={
        "Authorization": f"Bearer {bearer}", "x-claude-code-request-class": "subagent",
        "x-claude-code-agent-type": "Explore", "x-claude-code-prompt-id": "prompt-1",
        "x-claude-code-managed-settings-checksum": old_checksum,
    }, json={"model": model, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})
    assert resp.status_code == 200, resp.text
    deadline = time.monotonic() + 10
    while not ClientReport.objects.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    row = RequestLog.objects.get(model_requested=model)
    assert (row.cc_request_class, row.cc_agent_type, row.cc_prompt_id, row.cc_settings_checksum) == (
        "subagent", "Explore", "prompt-1", old_checksum)
    (report,) = ClientReport.objects.all()
    assert (report.user, report.surface, report.request_class) == (developer, "claude_code", "subagent")
    assert managed.verdict(report.settings_checksum, None) == managed.STALE
    assert managed.verdict(policy.checksum, None) == managed.CURRENT
    assert managed.verdict("sha256:" + "0" * 64, None) == managed.UNKNOWN
    assert managed.verdict("", None) == managed.MISSING
    policy.accepted_checksums = "sha256:" + "0" * 64
    policy.save()
    assert managed.verdict("sha256:" + "0" * 64, None) == managed.ACCEPTED


def test_the_admin_shows_each_developers_client_with_stale_settings_flagged(
        gateway: Server, bearer: str, developer: Any, admin_client: Any) -> None:
    policy = ManagedSettings.objects.create(settings=POLICY)
    ClientReport.objects.create(user=developer, surface="claude_code", settings_checksum="sha256:" + "1" * 64,
                                request_class="main", last_seen=policy.updated_at)
    page = admin_client.get("/admin/signin/clientreport/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "alice" in text and "⚠ unknown" in text
    assert "1" * 64 not in text  # only a prefix of the checksum is shown


def test_canonical_json_follows_javascript() -> None:
    value = {"b": [1.0, 0.1, 1.5e-6, 1e21, True, None], "a": {"é": "\n\"", "Z": 2}, "\U0001F600": 0, "\uFFFF": 1}
    # JSON.stringify of the same value with keys sorted by UTF-16 code units (U+1F600 is D83D DE00).
    expected = '{"Z":2,"é":"\\n\\""}'
    assert checksum.canonical(value["a"]) == expected
    assert checksum.canonical(value["b"]) == '[1,0.1,0.0000015,1e+21,true,null]'
    assert list(json.loads(checksum.canonical(value))) == ["a", "b", "\U0001F600", "\uFFFF"]
