"""Claude Code (``claude -p``, 2.1.332 as package.json pins it) through the gateway, on each upstream protocol: a turn that runs Bash.

The client is the real one from package.json, pointed at the gateway with
``ANTHROPIC_BASE_URL``; the scripted upstream's ``mock-shell`` asks for the prompt's
command and then answers with what the tool printed.
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


def tool_uses(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [block for e in events if e.get("type") == "assistant"
            for block in e["message"].get("content", []) if block.get("type") == "tool_use"]


def tool_outputs(events: list[dict[str, Any]]) -> list[str]:
    return [e["tool_use_result"].get("stdout", "") for e in events
            if e.get("type") == "user" and isinstance(e.get("tool_use_result"), dict)]


@pytest.mark.parametrize("upstream", UPSTREAMS)
def test_claude_code_runs_bash_and_answers_with_what_it_printed(
        agent_pool: Any, gateway: Server, mock_upstream: Server, marker: Marker, tmp_path: Path,
        upstream: str) -> None:
    run = agents.claude_code(gateway.url, CLIENT_KEY, alias(upstream), marker.prompt, tmp_path)
    why = run.transcript()
    events = run.events
    results = [e for e in events if e.get("type") == "result"]
    assert run.returncode == 0 and len(results) == 1, why
    (result,) = results
    # An API error reaches the user as an assistant message flagged "error" and a result with is_error.
    assert not result["is_error"] and result.get("api_error_status") is None, why
    assert not [e for e in events if e.get("type") == "assistant" and e.get("error")], why
    assert [(t["name"], t["input"].get("command")) for t in tool_uses(events)] == [("Bash", marker.command)], why
    assert [out.strip() for out in tool_outputs(events)] == [marker.output], why
    assert marker.output in result["result"], why
    check_upstream(mock_upstream, why)
