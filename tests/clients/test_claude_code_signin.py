"""The real Claude Code (2.1.332, the release whose gateway protocol this is) signs in to the gateway
through the device flow, then runs a tool loop with the bearer it was issued.

The sign-in is the CLI's own: ``claude auth login --gateway-json``, the machine-readable form of
``/login`` that the VS Code extension drives (one JSON object a line each way), offered when the
user settings name a gateway (``forceLoginMethod: "gateway"``). The test answers the CLI's three
questions (the gateway's URL, trusting it, the account it signed in as) and approves the code on the
verification page as a logged-in Django user, exactly as a developer would in a browser. The CLI
then reads the discovery document, runs the device flow and stores the bearer and refresh token;
``claude -p`` uses them with no key or base URL of its own, fetches the managed settings, and sends
the hint headers they turn on. ``claude auth logout`` revokes the sign-in (RFC 7009).
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from accounts.models import ModelAlias, Provider, RequestLog
from signin import managed
from signin.models import ClientReport, ManagedSettings, SignIn
from tests.clients import agents, signin
from tests.clients.conftest import Marker, check_upstream
from tests.clients.test_claude_code import tool_outputs, tool_uses
from tests.servers import Server, received

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# A model name the CLI knows (an unknown one costs a request of its own that mock-shell refuses),
# routed to the scripted upstream's shell scenario on the Anthropic protocol.
MODEL = "claude-sonnet-4-5"


@pytest.fixture
def signed_in(agent_pool: Any, gateway: Server, tmp_path: Path) -> dict[str, Any]:
    """A developer, the managed settings that turn the hint headers on, and ``claude`` signed in as them."""

    ModelAlias.objects.create(name=MODEL, provider=Provider.objects.get(name="up-anthropic"),
                              upstream_model="mock-shell")
    policy = ManagedSettings.objects.create(settings={"env": {"CLAUDE_CODE_GATEWAY_HINT_HEADERS": "1"}})
    done = signin.sign_in(gateway, tmp_path)
    login, home, work, user = done.login, done.home, done.work, done.user
    why = login.transcript()
    # The CLI showed the code and where to approve it, then the account the token endpoint named.
    polling = next(s for s in login.states if s["state"] == "polling")
    assert polling["verificationUri"] == gateway.url + "/device", why
    assert polling["browserUrl"] == f"{gateway.url}/device?user_code={polling['userCode']}", why
    assert next(s for s in login.states if s["state"] == "confirm_account")["shown"] == "dana@example.com", why
    return {"user": user, "policy": policy, "home": home, "work": work}


def logged_rows(count: int, since: datetime, timeout: float = 10.0) -> list[RequestLog]:
    """This run's rows: the gateway writes its log behind the answers, so a row of the test before
    (which shares the server) may still arrive after that test's tables were emptied."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = list(RequestLog.objects.select_related("user").filter(created_at__gte=since)
                    .order_by("created_at"))
        if len(rows) >= count:
            return rows
        time.sleep(0.1)
    raise AssertionError(f"{RequestLog.objects.count()} request-log rows, {count} expected")


def test_claude_code_signs_in_through_the_device_flow_and_runs_bash_with_its_bearer(
        signed_in: dict[str, Any], gateway: Server, mock_upstream: Server, marker: Marker) -> None:
    (sign_in,) = SignIn.objects.all()
    assert sign_in.user == signed_in["user"] and sign_in.surface == "claude_code"
    assert sign_in.user_agent.startswith("claude-code/2.1.332")
    # What the CLI stored is our bearer and refresh token (kept on disk: no keychain in the sandbox).
    stored = json.loads((signed_in["home"] / ".claude" / ".credentials.json").read_text())["enterpriseGateway"]
    assert stored["jwt"].startswith("gw-at-") and stored["idpRefreshToken"].startswith("gw-rt-")
    assert stored["revocationEndpoint"] == gateway.url + "/oauth/revoke"

    started = timezone.now()
    run = agents.claude_code_signed_in(signed_in["home"], signed_in["work"], MODEL, marker.prompt)
    why = run.transcript()
    results = [e for e in run.events if e.get("type") == "result"]
    assert run.returncode == 0 and len(results) == 1 and not results[0]["is_error"], why
    assert [(t["name"], t["input"].get("command")) for t in tool_uses(run.events)] == [("Bash", marker.command)], why
    assert [out.strip() for out in tool_outputs(run.events)] == [marker.output], why
    assert marker.output in results[0]["result"], why
    upstream = check_upstream(mock_upstream, why)
    # The bearer never travels upstream: the account's own key does.
    assert all("gw-at-" not in json.dumps(r.get("headers", {})) for r in upstream), why

    # Both turns are the developer's in the request log, with the client they signed in with, and
    # the hint headers the managed settings turned on: the checksum the CLI computed over the
    # settings it fetched is the one the gateway serves.
    policy = signed_in["policy"]
    rows = logged_rows(2, started)
    assert [(r.user, r.surface, r.status) for r in rows] == [(signed_in["user"], "claude_code", 200)] * 2, why
    assert {r.cc_settings_checksum for r in rows} == {policy.checksum}, why
    assert {r.cc_request_class for r in rows} == {"main"} and all(r.cc_prompt_id for r in rows), why
    (report,) = ClientReport.objects.all()
    assert managed.verdict(report.settings_checksum, None) == managed.CURRENT


def test_signing_out_revokes_and_a_revoked_bearer_stops_the_cli_at_once(
        signed_in: dict[str, Any], gateway: Server, mock_upstream: Server) -> None:
    credentials = signed_in["home"] / ".claude" / ".credentials.json"
    kept = credentials.read_text()
    env = agents.claude_code_env(signed_in["home"], MODEL)
    logout = agents.run([agents.executable("claude"), "auth", "logout"], signed_in["work"], env)
    assert logout.returncode == 0, logout.transcript()
    (sign_in,) = SignIn.objects.all()
    assert sign_in.revoked_at is not None  # the CLI called the revocation endpoint the discovery named

    # A machine that still holds the revoked credential (ops revoked it, say), with the client's own
    # retry policy on: it stops at once instead of retrying for minutes.
    credentials.write_text(kept)
    started = timezone.now()
    run = agents.claude_code_signed_in(signed_in["home"], signed_in["work"], MODEL, "say hi",
                                       retries=True)
    why = run.transcript()
    assert run.returncode not in (0, None), why  # None: still retrying when killed
    assert "no longer accepts this session" in run.stderr + run.stdout, why
    assert received(mock_upstream) == [], why
    assert not RequestLog.objects.filter(status=200, created_at__gte=started).exists(), why
