"""Codex CLI (``codex exec``, 0.171.0 as package.json pins it) through the gateway, on each upstream protocol: a turn that runs exec_command.

The client is the real one from package.json, with the gateway as a custom model
provider (``wire_api = "responses"``); the scripted upstream's ``mock-shell`` asks for
the prompt's command and then answers with what the tool printed.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from accounts.config_file import load
from accounts.models import RequestLog
from tests.clients import agents
from tests.clients.conftest import UPSTREAMS, Marker, alias, check_upstream
from tests.e2e.conftest import CLIENT_KEY
from tests.servers import Server, received, seen

pytestmark = pytest.mark.django_db(transaction=True)

# Codex says so for every model name it has no built-in metadata for; not an API error.
NO_METADATA = "Model metadata for"


def served_over(since: dt.datetime, count: int, timeout: float = 10.0) -> list[str]:
    """The transports of the request log's rows since ``since`` (not an earlier test's, written late),
    oldest first, once there are ``count`` of them."""

    deadline = time.monotonic() + timeout
    rows = RequestLog.objects.filter(created_at__gte=since).exclude(client_key_name="seen").order_by("created_at")
    while rows.count() < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return list(rows.values_list("transport", flat=True))


def items(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["item"] for e in events if e.get("type") == "item.completed" and e["item"].get("type") == kind]


def failures(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """API errors and retries ("Reconnecting…" arrives as a top-level error event), failed turns."""

    return ([e for e in events if e.get("type") in ("error", "turn.failed")]
            + [i for i in items(events, "error") if not i.get("message", "").startswith(NO_METADATA)])


@pytest.mark.parametrize("upstream", UPSTREAMS)
def test_codex_runs_exec_command_and_answers_with_what_it_printed(
        agent_pool: Any, gateway: Server, mock_upstream: Server, marker: Marker, tmp_path: Path,
        upstream: str) -> None:
    run = agents.codex(gateway.url, CLIENT_KEY, alias(upstream), marker.prompt, tmp_path)
    why = run.transcript()
    events = run.events
    assert run.returncode == 0, why
    assert failures(events) == [], why
    assert [e["type"] for e in events if e.get("type", "").startswith("turn.")] == ["turn.started", "turn.completed"], why
    commands = items(events, "command_execution")
    assert len(commands) == 1 and marker.command in commands[0]["command"], why
    assert commands[0]["exit_code"] == 0 and commands[0]["aggregated_output"].strip() == marker.output, why
    answers = items(events, "agent_message")
    assert answers and marker.output in answers[-1]["text"], why
    check_upstream(mock_upstream, why)


def test_codex_takes_the_gateways_catalog_entry_for_its_model(
        agent_pool: Any, gateway: Server, mock_upstream: Server, marker: Marker, tmp_path: Path) -> None:
    """With ``model_catalog_url``, Codex reads GET /v1/models?client_version=…: it finds metadata for the
    alias (no "Model metadata … not found") and works with the instructions the alias gives."""

    instructions = f"You are the gateway's house agent {marker.output}. Run what the user asks."
    load({"aliases": [{"name": alias("responses"), "provider": "up-responses", "model": "mock-shell",
                       "metadata": {"base_instructions": instructions, "context_window": 64000,
                                    "display_name": "House shell"}}]})
    seen(gateway)
    run = agents.codex(gateway.url, CLIENT_KEY, alias("responses"), marker.prompt, tmp_path, catalog=True)
    why = run.transcript()
    assert run.returncode == 0, why
    warnings = [i for i in items(run.events, "error") if i.get("message", "").startswith(NO_METADATA)]
    assert warnings == [] and failures(run.events) == [], why
    assert "failed to refresh available models" not in run.stderr, why
    commands = items(run.events, "command_execution")
    assert len(commands) == 1 and commands[0]["aggregated_output"].strip() == marker.output, why
    first = received(mock_upstream)[0]["body"]
    assert instructions in str(first), why  # Codex sent the catalog's instructions in place of its own


@pytest.mark.parametrize("upstream", ["responses", "openai_chat"])
def test_codex_runs_its_tool_loop_over_the_websocket_transport(
        agent_pool: Any, gateway: Server, mock_upstream: Server, marker: Marker, tmp_path: Path,
        upstream: str) -> None:
    """``supports_websockets = true``: Codex opens ws://…/v1/responses and sends each request as a
    ``response.create`` frame; the tool loop completes as over HTTP."""

    started = timezone.now()
    run = agents.codex(gateway.url, CLIENT_KEY, alias(upstream), marker.prompt, tmp_path, websockets=True)
    why = run.transcript()
    assert run.returncode == 0, why
    assert failures(run.events) == [], why
    commands = items(run.events, "command_execution")
    assert len(commands) == 1 and commands[0]["aggregated_output"].strip() == marker.output, why
    answers = items(run.events, "agent_message")
    assert answers and marker.output in answers[-1]["text"], why
    check_upstream(mock_upstream, why)
    assert served_over(started, 2) == ["websocket", "websocket"], why
