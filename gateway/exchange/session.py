"""Which conversation a request belongs to, from what its client already sends: pure, no I/O.

The providers cache a prompt per account, so the turns of one conversation should reach one
account (``gateway.exchange.selection``). A conversation is named by the first signal its client
sends of these, by the client's protocol (its module's ``SESSION_SIGNALS``; README "Session
affinity" has the table):

- Anthropic Messages: Claude Code's ``X-Claude-Code-Session-Id`` header; ``metadata.user_id``
  (Claude Code's names the session too; another client's names its user, whose conversations then
  share an account, which only costs spread);
- Responses: ``prompt_cache_key`` (Codex sends its thread id), the ``session-id`` and
  ``thread-id`` headers (Codex), ``conversation`` (its id), the first response of a
  ``previous_response_id`` chain (the caller passes it: the conversation store knows it), ``user``,
  ``safety_identifier``;
- Chat Completions: ``prompt_cache_key``, ``user``, ``safety_identifier``;
- otherwise, any protocol: a digest of the model and the stable prefix of the conversation (system
  or instructions, the tools' names, the first message), which every turn resends unchanged (the
  module's ``conversation_start`` says what its body resends first).

Never the client key alone: one key often serves many people. Every signal is hashed together
with the client key's id and the signal's name (BLAKE2b, 16 bytes), so sessions of different keys
never meet and the id itself, of whatever length or content, is never kept; the digest is all that
is stored or sent on.

A request that asks the provider for a longer cache (Anthropic ``cache_control.ttl: "1h"``,
OpenAI ``prompt_cache_retention: "24h"``) says so in :attr:`Session.cache_ttl` (the module's
``cache_ttl``): its affinity lasts as long as that cache.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from translation import registry
from translation.protocol import ProtocolModule

PREFIX = "prefix"  # the signal of a session named by its stable prefix


@dataclass(frozen=True)
class Session:
    digest: bytes  # 16 bytes
    signal: str  # which signal named it (a name of its protocol's SESSION_SIGNALS, or PREFIX)
    cache_ttl: float | None = None  # seconds the provider is asked to keep the cache, when longer than its default

    @property
    def hex(self) -> str:
        return self.digest.hex()


def session_of(client: str, headers: Mapping[str, str], body: Mapping[str, Any], key_id: int | None,
               chain_root: str | None = None) -> Session | None:
    """The session of a request of the ``client`` protocol; ``chain_root``: the first response of the
    ``previous_response_id`` chain it continues. None only for a body with nothing stable to go by."""

    proto = registry.get(client)
    ttl = proto.cache_ttl(body)
    for name, where in proto.SESSION_SIGNALS:
        if where == "header":
            value: Any = headers.get(name)
        elif where == "chain":
            value = chain_root
        else:
            value = _field(body, name)
        raw = _raw(value)
        if raw:
            return Session(_digest(key_id, name, raw), name, ttl)
    prefix = _prefix(proto, body)
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


def _prefix(proto: ProtocolModule, body: Mapping[str, Any]) -> bytes | None:
    """The model and what every turn of a conversation resends first; None when there is no first message."""

    system, first = proto.conversation_start(body)
    if first is None:
        return None
    tools = body.get("tools")
    names = [t.get("name") or (t.get("function") or {}).get("name") if isinstance(t, dict) else None
             for t in tools] if isinstance(tools, list) else None
    try:
        return orjson.dumps([body.get("model"), system, names, first], option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return None
