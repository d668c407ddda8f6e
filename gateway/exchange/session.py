"""Which conversation a request belongs to, from what its client already sends: pure, no I/O.

The providers cache a prompt per account, so the turns of one conversation should reach one
account (``gateway.exchange.selection``). A conversation is named by the first signal its client
sends of these, by the client's protocol (README "Session affinity" has the table):

- Anthropic Messages: Claude Code's ``X-Claude-Code-Session-Id`` header; ``metadata.user_id``
  (Claude Code's names the session too; another client's names its user, whose conversations then
  share an account, which only costs spread);
- Responses: ``prompt_cache_key`` (Codex sends its thread id), the ``session-id`` and
  ``thread-id`` headers (Codex), ``conversation`` (its id), the first response of a
  ``previous_response_id`` chain (the caller passes it: the conversation store knows it), ``user``,
  ``safety_identifier``;
- Chat Completions: ``prompt_cache_key``, ``user``, ``safety_identifier``;
- otherwise, any protocol: a digest of the model and the stable prefix of the conversation (system
  or instructions, the tools' names, the first message), which every turn resends unchanged.

Never the client key alone: one key often serves many people. Every signal is hashed together
with the client key's id and the signal's name (BLAKE2b, 16 bytes), so sessions of different keys
never meet and the id itself, of whatever length or content, is never kept; the digest is all that
is stored or sent on.

A request that asks the provider for a longer cache (Anthropic ``cache_control.ttl: "1h"``,
OpenAI ``prompt_cache_retention: "24h"``) says so in :attr:`Session.cache_ttl`: its affinity lasts
as long as that cache.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

HOUR = 3600.0
DAY = 86400.0

# The signals, by client protocol, in the order they are looked for: (name, where) — a header or a body field.
SIGNALS: dict[str, tuple[tuple[str, str], ...]] = {
    "anthropic": (("x-claude-code-session-id", "header"), ("metadata.user_id", "body")),
    "responses": (("prompt_cache_key", "body"), ("session-id", "header"), ("thread-id", "header"),
                  ("conversation", "body"), ("previous_response_id", "chain"), ("user", "body"),
                  ("safety_identifier", "body")),
    "openai_chat": (("prompt_cache_key", "body"), ("user", "body"), ("safety_identifier", "body")),
}
PREFIX = "prefix"  # the signal of a session named by its stable prefix


@dataclass(frozen=True)
class Session:
    digest: bytes  # 16 bytes
    signal: str  # which signal named it (a SIGNALS name, or PREFIX)
    cache_ttl: float | None = None  # seconds the provider is asked to keep the cache, when longer than its default

    @property
    def hex(self) -> str:
        return self.digest.hex()


def session_of(client: str, headers: Mapping[str, str], body: Mapping[str, Any], key_id: int | None,
               chain_root: str | None = None) -> Session | None:
    """The session of a request of the ``client`` protocol; ``chain_root``: the first response of the
    ``previous_response_id`` chain it continues. None only for a body with nothing stable to go by."""

    ttl = _cache_ttl(client, body)
    for name, where in SIGNALS.get(client, ()):
        if where == "header":
            value: Any = headers.get(name)
        elif where == "chain":
            value = chain_root
        else:
            value = _field(body, name)
        raw = _raw(value)
        if raw:
            return Session(_digest(key_id, name, raw), name, ttl)
    prefix = _prefix(client, body)
    if prefix is None:
        return None
    # The prefix is kilobytes (a system prompt, the first message): SHA-256, which CPUs compute in
    # hardware, reads it in half the time BLAKE2b takes (make bench: a session named by its prefix).
    return Session(_digest(key_id, PREFIX, hashlib.sha256(prefix).digest()), PREFIX, ttl)


def _digest(key_id: int | None, signal: str, raw: bytes) -> bytes:
    return hashlib.blake2b(f"{key_id}\x00{signal}\x00".encode() + raw, digest_size=16, person=b"gw-session").digest()


def _field(body: Mapping[str, Any], name: str) -> Any:
    if name == "metadata.user_id":
        metadata = body.get("metadata")
        return metadata.get("user_id") if isinstance(metadata, dict) else None
    value = body.get(name)
    if name == "conversation" and isinstance(value, dict):
        return value.get("id")
    return value


def _raw(value: Any) -> bytes:
    """A signal's bytes; nothing for an absent or empty one."""

    if value is None or value == "" or isinstance(value, bool):
        return b""
    if isinstance(value, str):
        return value.strip().encode("utf-8", "surrogatepass")
    if isinstance(value, (int, float)):
        return str(value).encode()
    return b""  # an object or a list is no session id


def _prefix(client: str, body: Mapping[str, Any]) -> bytes | None:
    """The model and what every turn of a conversation resends first; None when there is no first message."""

    if client == "responses":
        system: Any = body.get("instructions")
        items = body.get("input")
        first = items if isinstance(items, str) else _first(items, skip_roles=("system", "developer"))
        if isinstance(items, list):
            system = [system, *(_plain(i) for i in items[:4] if isinstance(i, dict)
                                and i.get("role") in ("system", "developer"))]
    elif client == "anthropic":
        system = _plain(body.get("system"))
        first = _first(body.get("messages"), skip_roles=())
    else:
        messages = body.get("messages")
        system = [_plain(m) for m in messages[:4] if isinstance(m, dict) and m.get("role") in ("system", "developer")] \
            if isinstance(messages, list) else None
        first = _first(messages, skip_roles=("system", "developer"))
    if first is None:
        return None
    tools = body.get("tools")
    names = [t.get("name") or (t.get("function") or {}).get("name") if isinstance(t, dict) else None
             for t in tools] if isinstance(tools, list) else None
    try:
        return orjson.dumps([body.get("model"), system, names, first], option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return None


def _first(messages: Any, skip_roles: tuple[str, ...]) -> Any:
    if not isinstance(messages, list):
        return None
    for message in messages:
        if isinstance(message, dict) and message.get("role") not in skip_roles:
            return _plain(message)
    return None


def _plain(part: Any) -> Any:
    """``part`` without its cache breakpoints, which clients move from turn to turn (Claude Code marks
    the newest message): the prefix is the same conversation whichever block carries the mark."""

    if isinstance(part, list):
        return [_plain(p) for p in part]
    if isinstance(part, dict):
        if "cache_control" in part or any(isinstance(v, list) for v in part.values()):
            return {k: _plain(v) for k, v in part.items() if k != "cache_control"}
        return part
    return part


def _cache_ttl(client: str, body: Mapping[str, Any]) -> float | None:
    if client == "anthropic":
        return HOUR if _asks_hour(body) else None
    retention = body.get("prompt_cache_retention")
    if retention == "24h":
        return DAY
    return None


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
