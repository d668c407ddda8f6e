"""Codex CLI (0.171.0, package.json) compacting a long conversation through the gateway on a Chat upstream.

Codex compacts remotely (docs/compaction.md) only for a provider it takes for OpenAI's own, so
the gateway is configured as one (README "Codex CLI"); a low auto-compact limit makes the second
turn start with a compaction. The gateway answers Codex's compaction trigger with a summary the
upstream model wrote, and the turn that follows reaches the upstream with that summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from accounts.config_file import load
from tests.clients import agents
from tests.clients.test_codex import failures, items
from tests.e2e.conftest import CLIENT_KEY
from tests.servers import Server, received, seen

pytestmark = pytest.mark.django_db(transaction=True)

FIRST = "Remember this: the release codename is amber-falcon-7. Reply briefly."
SECOND = "Now answer in one line: are you still there?"


def user_texts(chat_body: dict[str, Any]) -> list[str]:
    out = []
    for message in chat_body["messages"]:
        if message["role"] == "user":
            content = message["content"]
            out.append(content if isinstance(content, str) else "".join(p.get("text", "") for p in content))
    return out


def test_codex_compacts_through_a_chat_upstream_and_carries_on_from_the_summary(
        agent_pool: Any, gateway: Server, mock_upstream: Server, tmp_path: Path) -> None:
    load({"aliases": [{"name": "text-chat", "provider": "up-openai_chat", "model": "mock-text"}]})
    seen(gateway)
    httpx.post(mock_upstream.url + "/_mock/reset")
    # Codex's own instructions alone are thousands of tokens: past 2000 after the first turn.
    first, second = agents.codex_conversation(gateway.url, CLIENT_KEY, "text-chat", [FIRST, SECOND], tmp_path,
                                              compact_above=2000)
    why = first.transcript() + second.transcript()
    assert first.returncode == 0 and second.returncode == 0, why
    assert failures(first.events) == [] and failures(second.events) == [], why
    chat = [r["body"] for r in received(mock_upstream) if r["path"] == "/v1/chat/completions"]
    asks = [user_texts(body) for body in chat]
    # 1: the first turn; 2: the summary the gateway asked for on Codex's compaction trigger;
    # 3: the second turn, continued from that summary.
    assert len(asks) == 3, f"{asks}{why}"
    assert asks[0][-1] == FIRST, why
    assert asks[1][-1].startswith("You are compacting this conversation") and FIRST in asks[1], why
    summary = [t for t in asks[2] if t.startswith("Summary of the conversation so far")]
    assert len(summary) == 1 and "amber-falcon-7" in summary[0], why
    assert asks[2][-1] == SECOND, why
    # The second turn was answered.
    answers = items(second.events, "agent_message")
    assert answers and answers[-1]["text"] == "Hello! This is the mock upstream.", why
