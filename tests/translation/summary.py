"""What a client ends up with, in one comparable shape.

Each protocol's test package provides ``sdk_readback.py`` with
``summary_from_stream(wire: bytes) -> Summary`` and
``summary_from_json(body: dict) -> Summary`` built ONLY from what the official
SDK's own parser and accumulator produced; :func:`summary_of` computes the same
shape from the IR the stream was encoded from, so the two can be compared.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from translation import ir


@dataclass
class Summary:
    text: str = ""
    reasoning: str = ""
    tool_calls: list[tuple[str, str, Any]] = field(default_factory=list)  # (id, name, parsed args)
    finish: ir.FinishReason | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    signatures: list[str] = field(default_factory=list)
    error: str | None = None


def parse_args(text: str) -> Any:
    if not text:
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return text


def summary_of(resp: ir.Response) -> Summary:
    s = Summary()
    for b in resp.blocks:
        if b.kind == "text":
            s.text += b.text
        elif b.kind == "reasoning":
            s.reasoning += b.text
            if b.signature:
                s.signatures.append(b.signature)
        elif b.kind == "tool_call":
            s.tool_calls.append((b.id or "", b.name or "", parse_args(b.text)))
    s.finish = resp.finish.reason if resp.finish else None
    u = resp.usage
    s.input_tokens, s.output_tokens = u.input_tokens, u.output_tokens
    s.cached_tokens, s.reasoning_tokens = u.cached_tokens, u.reasoning_tokens
    if resp.error is not None:
        s.error = resp.error.message
    return s
