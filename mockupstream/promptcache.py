"""The scripted upstream's prompt cache: one per account key, kept as the providers keep theirs.

Providers cache a prompt's prefix per account (Anthropic per organisation, OpenAI per organisation and
prefix) and bill a read at a tenth of the input price, so which account serves each turn of a
conversation decides what it costs. This cache lets tests and the bench see that from outside:

- **Anthropic** (``/v1/messages``) caches on request, at each block marked ``cache_control``: the prefix
  up to and including that block (tools, then system, then messages, in that order) is written
  for five minutes, refreshed on each hit, or an hour with ``"ttl": "1h"``. A later request reads the
  longest prefix that is still cached and ends at one of its block boundaries at or up to 20 blocks
  before one of its own breakpoints. Prefixes shorter than 1,024 tokens are not cached. Usage:
  ``cache_read_input_tokens``, ``cache_creation_input_tokens`` (from the read to the last breakpoint)
  and ``cache_creation`` split into five-minute and one-hour writes; ``input_tokens`` the rest.
- **OpenAI** (Chat and Responses) caches every prompt unasked, for prefixes of 1,024 tokens or more
  in 128-token steps; a request reads the longest such prefix already cached (five minutes, refreshed
  on each hit). Usage: ``prompt_tokens_details.cached_tokens`` / ``input_tokens_details.cached_tokens``;
  OpenAI reports no writes.

Tokens are the scripted upstream's own count (characters // 4, as ``scenarios.estimate_input_tokens``
counts the input: text, reasoning, tool-call arguments and results; tool definitions and images weigh
nothing but still take part in the prefix's identity). A cache entry is the digest of the prefix and
the model, so another model, tool set or wording is another prefix.

The five-minute TTL is ``ttl`` (``--cache-ttl``, ``POST /_mock/cache {"ttl_seconds": N}``); an
hour-long entry lives twelve times as long, so that a test can shorten both alike.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from translation import ir

FIVE_MINUTES = 300.0
HOUR_FACTOR = 12  # an hour-long entry's TTL, in five-minute TTLs
MIN_TOKENS = 1024
STEP_TOKENS = 128  # OpenAI caches prefixes in steps of this many tokens past the minimum
CHARS_PER_TOKEN = 4
LOOKBACK_BLOCKS = 20  # Anthropic looks for a cached prefix this many blocks back from a breakpoint
MAX_ENTRIES = 200_000


@dataclass(frozen=True)
class Hit:
    """What one request read from the cache and wrote to it, in tokens."""

    read: int = 0
    write: int = 0
    write_1h: int = 0


@dataclass(frozen=True)
class Block:
    """An Anthropic prompt block: its identity, its weight, and its breakpoint (None: none)."""

    ident: bytes
    chars: int
    hour: bool | None = None  # True: a one-hour breakpoint, False: a five-minute one


@dataclass
class KeyTotals:
    """A key's cache traffic, for ``GET /_mock/stats``: input tokens, cache reads, cache writes (on an
    OpenAI endpoint, the prefix tokens newly cached, which its usage does not report)."""

    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "cache_read_tokens": self.cache_read_tokens,
                "cache_write_tokens": self.cache_write_tokens}


@dataclass
class PromptCache:
    ttl: float = FIVE_MINUTES
    clock: Callable[[], float] = time.monotonic
    # (account key, prefix digest) → (expiry, lifetime): insertion order is age, the oldest go first past the cap
    _entries: dict[tuple[str, bytes], tuple[float, float]] = field(default_factory=dict)
    totals: dict[str, KeyTotals] = field(default_factory=dict)  # by the key's shown suffix

    def clear(self) -> None:
        self._entries.clear()
        self.totals.clear()

    # ------------------------------------------------------------- per protocol

    def anthropic(self, key: str, shown: str, body: dict[str, Any], input_tokens: int) -> Hit:
        """Read and write the prefixes ``body``'s breakpoints mark; the hit, clipped to ``input_tokens``."""

        blocks = anthropic_blocks(body)
        digests = _chain(str(body.get("model")), blocks)
        ends = _running([b.chars for b in blocks])
        breakpoints = [i for i, b in enumerate(blocks) if b.hour is not None]
        now = self.clock()
        read_at = -1
        for b in breakpoints:
            for j in range(b, max(-1, b - LOOKBACK_BLOCKS), -1):
                if j > read_at and self._alive(key, digests[j], now):
                    read_at = j
                    break
        if read_at >= 0:
            self._refresh(key, digests[read_at], now)
        read = _tokens(ends[read_at]) if read_at >= 0 else 0
        written = [b for b in breakpoints if b > read_at and _tokens(ends[b]) >= MIN_TOKENS]
        for b in written:
            self._store(key, digests[b], self.ttl * (HOUR_FACTOR if blocks[b].hour else 1), now)
        write = _tokens(ends[written[-1]]) - read if written else 0
        hours = [b for b in written if blocks[b].hour]
        write_1h = _tokens(ends[hours[-1]]) - read if hours else 0
        return self._count(shown, _clipped(Hit(read, write, write_1h), input_tokens), input_tokens)

    def openai(self, key: str, shown: str, req: ir.Request, input_tokens: int) -> Hit:
        """Read the longest cached prefix of ``req`` and cache all of its prefixes (OpenAI's rule)."""

        seed = orjson.dumps([req.model, [[t.name, t.description, t.parameters] for t in req.tools]],
                            option=orjson.OPT_SORT_KEYS)
        steps = _step_digests(seed, _openai_segments(req))
        now = self.clock()
        read = 0
        for tokens, digest in reversed(steps):
            if self._alive(key, digest, now):
                read = tokens
                self._refresh(key, digest, now)
                break
        for tokens, digest in steps:
            if tokens > read:
                self._store(key, digest, self.ttl, now)
        newly = steps[-1][0] - read if steps and steps[-1][0] > read else 0
        hit = self._count(shown, _clipped(Hit(read), input_tokens), input_tokens)
        self.totals[shown].cache_write_tokens += min(newly, max(input_tokens - hit.read, 0))
        return hit

    # ------------------------------------------------------------- entries

    def _alive(self, key: str, digest: bytes, now: float) -> bool:
        entry = self._entries.get((key, digest))
        return entry is not None and entry[0] > now

    def _refresh(self, key: str, digest: bytes, now: float) -> None:
        expires, lifetime = self._entries.pop((key, digest))
        self._entries[(key, digest)] = (now + lifetime, lifetime)  # re-inserted: the youngest now

    def _store(self, key: str, digest: bytes, lifetime: float, now: float) -> None:
        old = self._entries.pop((key, digest), None)
        if old is not None and old[0] > now:
            lifetime = max(lifetime, old[1])  # a five-minute write does not shorten an hour-long entry
        self._entries[(key, digest)] = (now + lifetime, lifetime)
        if len(self._entries) > MAX_ENTRIES:
            for stale in [k for k, (expires, _) in self._entries.items() if expires <= now]:
                del self._entries[stale]
            while len(self._entries) > MAX_ENTRIES:
                del self._entries[next(iter(self._entries))]

    def _count(self, shown: str, hit: Hit, input_tokens: int) -> Hit:
        totals = self.totals.setdefault(shown, KeyTotals())
        totals.input_tokens += input_tokens
        totals.cache_read_tokens += hit.read
        totals.cache_write_tokens += hit.write
        return hit


def apply(events: Iterable[Any], hit: Hit, anthropic: bool) -> None:
    """Write ``hit`` into every usage a plan's events carry, in the fields the protocol reports:
    Anthropic reads, writes and their TTL split (zeros included, as the API sends them), OpenAI reads."""

    for event in events:
        usage = event.usage if isinstance(event, ir.MessageStart) else event
        if not isinstance(usage, ir.Usage):
            continue
        usage.cached_tokens = hit.read
        if anthropic:
            usage.cache_creation_tokens = hit.write
            usage.cache_creation_1h_tokens = hit.write_1h


def _clipped(hit: Hit, input_tokens: int) -> Hit:
    read = min(hit.read, input_tokens)
    write = min(hit.write, input_tokens - read)
    return Hit(read, write, min(hit.write_1h, write))


def _tokens(chars: int) -> int:
    return chars // CHARS_PER_TOKEN


def _running(weights: list[int]) -> list[int]:
    out, total = [], 0
    for w in weights:
        total += w
        out.append(total)
    return out


def _chain(model: str, blocks: list[Block]) -> list[bytes]:
    """The digest of each prefix: the model, then the blocks up to and including each one."""

    h = hashlib.sha256(model.encode())
    out = []
    for block in blocks:
        h.update(hashlib.sha256(block.ident).digest())
        out.append(h.copy().digest())
    return out


# ----------------------------------------------------------------- Anthropic blocks


def _breakpoint(block: Any) -> bool | None:
    marker = block.get("cache_control") if isinstance(block, dict) else None
    if not isinstance(marker, dict):
        return None
    return marker.get("ttl") == "1h"


def _ident(where: str, block: Any) -> bytes:
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return orjson.dumps([where, block], option=orjson.OPT_SORT_KEYS)


def _chars(block: Any) -> int:
    """What the scripted upstream counts of a block as input (``scenarios.estimate_input_tokens``)."""

    if isinstance(block, str):
        return len(block)
    if not isinstance(block, dict):
        return 0
    match block.get("type"):
        case "text":
            return len(block.get("text") or "")
        case "thinking":
            return len(block.get("thinking") or "")
        case "tool_use":
            return len(orjson.dumps(block.get("input", {})))
        case "tool_result":
            content = block.get("content")
            if isinstance(content, list):
                return sum(len(b.get("text") or "") for b in content if isinstance(b, dict) and b.get("type") == "text")
            return len(content) if isinstance(content, str) else 0
    return 0


def anthropic_blocks(body: dict[str, Any]) -> list[Block]:
    """A Messages body's blocks in the order the cache reads them: tools, system, messages."""

    out: list[Block] = []
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else []:
        out.append(Block(_ident("tool", tool), 0, _breakpoint(tool)))
    system = body.get("system")
    if isinstance(system, str):
        out.append(Block(_ident("system", system), len(system)))
    elif isinstance(system, list):
        out += [Block(_ident("system", b), _chars(b), _breakpoint(b)) for b in system]
    messages = body.get("messages")
    for msg in messages if isinstance(messages, list) else []:
        if not isinstance(msg, dict):
            continue
        role, content = str(msg.get("role")), msg.get("content")
        if isinstance(content, str):
            out.append(Block(_ident(role, content), len(content)))
        elif isinstance(content, list):
            out += [Block(_ident(role, b), _chars(b), _breakpoint(b)) for b in content]
    return out


# ----------------------------------------------------------------- OpenAI prefixes


def _openai_segments(req: ir.Request) -> list[tuple[bytes, str]]:
    """The prompt as (tag, counted text) in order: the tag (role, part kind) is part of the prefix's
    identity but not of its length."""

    out: list[tuple[bytes, str]] = [(b"system", p.text) for p in req.system]
    for msg in req.messages:
        for part in msg.parts:
            tag = f"{msg.role}:{type(part).__name__}".encode()
            if isinstance(part, ir.TextPart | ir.ReasoningPart):
                out.append((tag, part.text))
            elif isinstance(part, ir.ToolCallPart):
                out.append((tag + part.name.encode(), part.arguments))
            elif isinstance(part, ir.ToolResultPart):
                out.append((tag, part.text()))
            else:
                out.append((tag + orjson.dumps(part, default=str, option=orjson.OPT_SORT_KEYS), ""))
    return out


def _step_digests(seed: bytes, segments: list[tuple[bytes, str]]) -> list[tuple[int, bytes]]:
    """(tokens, digest) of each cacheable prefix: 1,024 tokens, then every 128 more, up to the whole prompt."""

    h = hashlib.sha256(seed)
    out: list[tuple[int, bytes]] = []
    at = 0  # characters so far
    target = MIN_TOKENS * CHARS_PER_TOKEN
    for tag, text in segments:
        h.update(b"\x00" + tag + b"\x00")
        start = 0
        while target - at <= len(text) - start:
            cut = start + target - at
            h.update(text[start:cut].encode("utf-8", "surrogatepass"))
            out.append((target // CHARS_PER_TOKEN, h.copy().digest()))
            at, start = target, cut
            target += STEP_TOKENS * CHARS_PER_TOKEN
        h.update(text[start:].encode("utf-8", "surrogatepass"))
        at += len(text) - start
    return out
