"""What names a Responses conversation (``gateway.exchange.session`` hashes it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..session import INSTRUCTING, Signal, first, plain, retention_ttl

# prompt_cache_key (Codex sends its thread id), Codex's session-id and thread-id headers, conversation
# (its id), the first response of a previous_response_id chain, user, safety_identifier.
SESSION_SIGNALS: tuple[Signal, ...] = (
    ("prompt_cache_key", "body"), ("session-id", "header"), ("thread-id", "header"), ("conversation", "body"),
    ("previous_response_id", "chain"), ("user", "body"), ("safety_identifier", "body"))


def conversation_start(body: Mapping[str, Any]) -> tuple[Any, Any]:
    """The instructions with the system and developer items among the first four, and the first item
    of another role (or the input, when it is a string)."""

    system: Any = body.get("instructions")
    items = body.get("input")
    start = items if isinstance(items, str) else first(items, skip_roles=INSTRUCTING)
    if isinstance(items, list):
        system = [system, *(plain(i) for i in items[:4] if isinstance(i, dict) and i.get("role") in INSTRUCTING)]
    return system, start


def cache_ttl(body: Mapping[str, Any]) -> float | None:
    return retention_ttl(body)
