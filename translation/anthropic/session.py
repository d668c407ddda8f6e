"""What names a Messages conversation (``gateway.exchange.session`` hashes it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..session import HOUR, Signal, first, plain

# Claude Code's session header; metadata.user_id (Claude Code's names the session too; another
# client's names its user, whose conversations then share an account, which only costs spread).
SESSION_SIGNALS: tuple[Signal, ...] = (("x-claude-code-session-id", "header"), ("metadata.user_id", "body"))


def conversation_start(body: Mapping[str, Any]) -> tuple[Any, Any]:
    """The system and the first message, which every turn resends."""

    return plain(body.get("system")), first(body.get("messages"), skip_roles=())


def cache_ttl(body: Mapping[str, Any]) -> float | None:
    """An hour when the body asks for the hour-long cache (``cache_control.ttl: "1h"``)."""

    return HOUR if _asks_hour(body) else None


def _asks_hour(body: Mapping[str, Any]) -> bool:
    """Any ``cache_control`` with ``ttl: "1h"`` on the system, the last tool or the last two messages
    (where clients put their breakpoints; the whole conversation is not walked on every request)."""

    messages = body.get("messages")
    tools = body.get("tools")
    places: list[Any] = [body.get("system"), tools[-1] if isinstance(tools, list) and tools else None,
                         body.get("cache_control")]
    if isinstance(messages, list):
        places += [m.get("content") for m in messages[-2:] if isinstance(m, dict)]
    for place in places:
        blocks = place if isinstance(place, list) else [place]
        for block in blocks:
            if isinstance(block, dict):
                mark = block.get("cache_control")
                if isinstance(mark, dict) and mark.get("ttl") == "1h":
                    return True
    return False
