"""Codex CLI 0.169.0 (``codex exec``) through the gateway, on each upstream protocol: a turn that runs exec_command.

The client is the real one from package.json, with the gateway as a custom model
provider (``wire_api = "responses"``); the scripted upstream's ``mock-shell`` asks for
the prompt's command and then answers with what the tool printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.clients import agents
from tests.clients.conftest import UPSTREAMS, Marker, alias, check_upstream
from tests.e2e.conftest import CLIENT_KEY
from tests.servers import Server

pytestmark = pytest.mark.django_db(transaction=True)

# Codex says so for every model name it has no built-in metadata for; not an API error.
NO_METADATA = "Model metadata for"


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
