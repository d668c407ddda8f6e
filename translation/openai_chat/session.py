"""What names a Chat Completions conversation (``gateway.exchange.session`` hashes it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..session import INSTRUCTING, Signal, first, plain, retention_ttl

SESSION_SIGNALS: tuple[Signal, ...] = (("prompt_cache_key", "body"), ("user", "body"), ("safety_identifier", "body"))


def conversation_start(body: Mapping[str, Any]) -> tuple[Any, Any]:
    """The system and developer messages among the first four, and the first message of another role."""

    messages = body.get("messages")
    system = [plain(m) for m in messages[:4] if isinstance(m, dict) and m.get("role") in INSTRUCTING] \
        if isinstance(messages, list) else None
    return system, first(messages, skip_roles=INSTRUCTING)


def cache_ttl(body: Mapping[str, Any]) -> float | None:
    return retention_ttl(body)
