"""Cache breakpoints on a Messages body built from another protocol's request.

OpenAI caches the prefix of every prompt without being asked; Anthropic caches only up to the blocks
marked ``cache_control``, so a Chat or Responses conversation translated to an Anthropic upstream
would never be read from its cache, every turn paying the full input price. The gateway says
whether to mark (``UpstreamCaps.cache_breakpoints``, a per-provider switch); this module places the
marks where OpenAI's automatic caching would have cached, within Anthropic's limit of four per request
(counting any already there), in this order of worth:

1. the conversation's last stable message: the last message, or the one before a trailing assistant
   prefill (which the next turn replaces with the whole answer) — the next turn's prefix;
2. the last system block (tools and system: what every turn of every conversation with the same
   instructions shares);
3. the last tool;
4. the last message of the previous user turn: the prefix the previous request wrote, found again
   even when the last turn added more blocks than Anthropic looks back over (20).

A mark goes on the last block of the message that can carry one (never a thinking block, never
empty text). Prefixes shorter than the model's minimum (1,024 tokens and up) are simply not cached
upstream, so marking them costs nothing.
"""

from __future__ import annotations

from typing import Any

MAX_BREAKPOINTS = 4
EPHEMERAL = {"type": "ephemeral"}
_UNMARKABLE = ("thinking", "redacted_thinking")


def place(body: dict[str, Any]) -> dict[str, Any]:
    """Mark ``body`` (a Messages body this gateway built, changed in place) and return it."""

    room = MAX_BREAKPOINTS - count(body)
    if room <= 0:
        return body
    for target in _targets(body):
        if room <= 0:
            break
        if isinstance(target, dict) and "cache_control" not in target:
            target["cache_control"] = dict(EPHEMERAL)
            room -= 1
    return body


def count(body: dict[str, Any]) -> int:
    """The breakpoints ``body`` already has (tools, system, message blocks and tool results' blocks)."""

    def marked(blocks: Any) -> int:
        if not isinstance(blocks, list):
            return 0
        n = 0
        for block in blocks:
            if isinstance(block, dict):
                n += "cache_control" in block
                n += marked(block.get("content")) if block.get("type") == "tool_result" else 0
        return n

    messages = body.get("messages")
    in_messages = sum(marked(m.get("content")) for m in messages if isinstance(m, dict)) \
        if isinstance(messages, list) else 0
    return marked(body.get("tools")) + marked(body.get("system")) + in_messages


def _targets(body: dict[str, Any]) -> list[Any]:
    """The blocks to mark, most worth first (the module's list); None where there is nothing to mark."""

    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    stable = len(messages) - 1
    if stable > 0 and messages[stable].get("role") == "assistant":
        stable -= 1  # a prefill: the next turn sends the whole answer in its place
    previous = next((i for i in range(stable - 1, -1, -1)
                     if messages[i].get("role") == "user" and messages[i + 1].get("role") != "user"), None)
    tools = body.get("tools")
    return [
        _last_markable(messages[stable]) if stable >= 0 else None,
        _system_block(body),
        tools[-1] if isinstance(tools, list) and tools else None,
        _last_markable(messages[previous]) if previous is not None else None,
    ]


def _last_markable(message: dict[str, Any]) -> dict[str, Any] | None:
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return None
        message["content"] = content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return None
    for block in reversed(content):
        if (isinstance(block, dict) and block.get("type") not in _UNMARKABLE
                and not (block.get("type") == "text" and not block.get("text"))):
            return block
    return None


def _system_block(body: dict[str, Any]) -> dict[str, Any] | None:
    system = body.get("system")
    if isinstance(system, str):
        if not system:
            return None
        body["system"] = system = [{"type": "text", "text": system}]
    if isinstance(system, list) and system and isinstance(system[-1], dict):
        return system[-1]
    return None
