"""Anthropic usage ⇄ IR usage.

Anthropic reports ``input_tokens`` *without* the cached parts
(``cache_read_input_tokens`` and ``cache_creation_input_tokens`` are disjoint
from it); the IR's ``input_tokens`` is the total prompt, so we add on the way
in and subtract on the way out.
"""

from __future__ import annotations

from typing import Any

from .. import ir

USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def merge_wire(old: dict[str, int], new: Any) -> dict[str, int]:
    """Anthropic usage reports are cumulative totals: later fields overwrite, absent ones stay."""

    out = dict(old)
    if not isinstance(new, dict):
        return out
    for name in USAGE_FIELDS:
        value = _int(new.get(name))
        if value is not None:
            out[name] = value
    split = new.get("cache_creation")  # {"ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"}
    if isinstance(split, dict):
        hour = _int(split.get("ephemeral_1h_input_tokens"))
        if hour is not None:
            out["ephemeral_1h_input_tokens"] = hour
    details = new.get("output_tokens_details")
    if isinstance(details, dict):
        thinking = _int(details.get("thinking_tokens"))
        if thinking is not None:
            out["thinking_tokens"] = thinking
    return out


def to_ir(wire: Any) -> ir.Usage:
    """An Anthropic ``usage`` object as IR usage."""

    return totals_to_ir(merge_wire({}, wire))


def totals_to_ir(fields: dict[str, int]) -> ir.Usage:
    """The flat totals :func:`merge_wire` keeps, as IR usage."""

    cached = fields.get("cache_read_input_tokens")
    creation = fields.get("cache_creation_input_tokens")
    uncached = fields.get("input_tokens")
    total: int | None = None
    if uncached is not None:
        total = uncached + (cached or 0) + (creation or 0)
    return ir.Usage(
        input_tokens=total,
        output_tokens=fields.get("output_tokens"),
        cached_tokens=cached,
        cache_creation_tokens=creation,
        cache_creation_1h_tokens=fields.get("ephemeral_1h_input_tokens"),
        reasoning_tokens=fields.get("thinking_tokens"),
    )


def from_ir(usage: ir.Usage | None) -> dict[str, Any]:
    """IR usage as Anthropic reports it; every count present (0 when unknown)."""

    usage = usage or ir.Usage()
    cached = usage.cached_tokens or 0
    creation = usage.cache_creation_tokens or 0
    out: dict[str, Any] = {
        "input_tokens": max(0, (usage.input_tokens or 0) - cached - creation),
        "output_tokens": usage.output_tokens or 0,
        "cache_creation_input_tokens": creation,
        "cache_read_input_tokens": cached,
    }
    if usage.cache_creation_1h_tokens is not None:
        hour = min(usage.cache_creation_1h_tokens, creation)
        out["cache_creation"] = {"ephemeral_5m_input_tokens": creation - hour, "ephemeral_1h_input_tokens": hour}
    if usage.reasoning_tokens is not None:
        out["output_tokens_details"] = {"thinking_tokens": usage.reasoning_tokens}
    return out
