"""Responses ``usage`` ⇄ :class:`ir.Usage`.

Responses already uses the IR convention: ``input_tokens`` is the whole prompt
(``input_tokens_details.cached_tokens`` a subset) and ``output_tokens`` includes
``output_tokens_details.reasoning_tokens``.
"""

from __future__ import annotations

from typing import Any

from .. import ir


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value)


def _sub(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


def parse_usage(usage: Any) -> ir.Usage | None:
    """An upstream ``usage`` object; None when it is absent or not an object."""

    if not isinstance(usage, dict):
        return None
    details = usage.get("input_tokens_details")
    return ir.Usage(
        input_tokens=_int(usage.get("input_tokens")),
        output_tokens=_int(usage.get("output_tokens")),
        cached_tokens=_int(_sub(details, "cached_tokens")),
        cache_creation_tokens=_int(_sub(details, "cache_write_tokens")),
        reasoning_tokens=_int(_sub(usage.get("output_tokens_details"), "reasoning_tokens")),
    )


def render_usage(usage: ir.Usage) -> dict[str, Any]:
    """The full usage object; Responses clients expect every field, so unknowns are 0."""

    inp = usage.input_tokens or 0
    out = usage.output_tokens or 0
    return {
        "input_tokens": inp,
        "input_tokens_details": {
            "cached_tokens": usage.cached_tokens or 0,
            "cache_write_tokens": usage.cache_creation_tokens or 0,
        },
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0},
        "total_tokens": inp + out,
    }
