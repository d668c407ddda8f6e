"""What names a conversation, as each protocol module tells it (``SESSION_SIGNALS``,
``conversation_start``, ``cache_ttl``): the parts they share. The gateway hashes what they return
(``gateway.exchange.session``); nothing here is hashed or kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

HOUR = 3600.0
DAY = 86400.0

# Where a signal is read: a header, a body field (a dotted name: nested), or the first response of the
# previous_response_id chain the request continues (the gateway's conversation store knows it).
Where = Literal["header", "body", "chain"]
Signal = tuple[str, Where]  # (name, where)
INSTRUCTING = ("system", "developer")  # the OpenAI protocols' roles of a system part among the messages


def first(messages: Any, skip_roles: tuple[str, ...]) -> Any:
    """The first message not of ``skip_roles``, without its cache breakpoints; None when there is none."""

    if not isinstance(messages, list):
        return None
    for message in messages:
        if isinstance(message, dict) and message.get("role") not in skip_roles:
            return plain(message)
    return None


def plain(part: Any) -> Any:
    """``part`` without its cache breakpoints, which clients move from turn to turn (Claude Code marks
    the newest message): the prefix is the same conversation whichever block carries the mark."""

    if isinstance(part, list):
        return [plain(p) for p in part]
    if isinstance(part, dict):
        if "cache_control" in part or any(isinstance(v, list) for v in part.values()):
            return {k: plain(v) for k, v in part.items() if k != "cache_control"}
        return part
    return part


def retention_ttl(body: Mapping[str, Any]) -> float | None:
    """OpenAI's ``prompt_cache_retention: "24h"`` (Chat Completions and Responses alike)."""

    return DAY if body.get("prompt_cache_retention") == "24h" else None
