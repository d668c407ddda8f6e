"""What a model alias tells clients about its models in ``GET /v1/models`` (``ModelAlias.metadata``).

A JSON object, every key optional. Keys every listing reads:
``display_name``, ``created_at`` (RFC 3339; the OpenAI shape gives it as Unix seconds),
``context_window`` (Anthropic's ``max_input_tokens``), ``max_output_tokens`` (Anthropic's ``max_tokens``).
Codex CLI's catalog (``GET /v1/models?client_version=…``) takes every key by Codex's own field
names (``base_instructions``, ``supported_reasoning_levels``, ``default_reasoning_level``,
``supports_reasoning_summaries``, ``context_window``, ``truncation_policy``, …); its reasoning
levels may be written as plain effort names (``["low", "medium", "high"]``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

TEXT_KEYS = ("display_name", "description", "base_instructions", "default_reasoning_level")
COUNT_KEYS = ("context_window", "max_output_tokens", "auto_compact_token_limit")
FLAG_KEYS = ("supports_reasoning_summaries", "support_verbosity", "supports_parallel_tool_calls", "supported_in_api")


def parse_time(value: str) -> datetime | None:
    """An RFC 3339 time (``2025-05-14T00:00:00Z``), or None when it is not one."""

    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def validate_metadata(meta: Any) -> list[str]:
    """What is wrong with ``meta`` (empty: nothing), in words an operator can act on."""

    if not isinstance(meta, dict):
        return ["metadata must be an object"]
    problems = [f"'{k}' must be text" for k in TEXT_KEYS if k in meta and not isinstance(meta[k], str)]
    problems += [f"'{k}' must be a whole number above 0" for k in COUNT_KEYS if k in meta
                 and (not isinstance(meta[k], int) or isinstance(meta[k], bool) or meta[k] <= 0)]
    problems += [f"'{k}' must be true or false" for k in FLAG_KEYS if k in meta and not isinstance(meta[k], bool)]
    if "created_at" in meta and not (isinstance(meta["created_at"], str) and parse_time(meta["created_at"])):
        problems.append("'created_at' must be an RFC 3339 time with its zone, e.g. 2025-05-14T00:00:00Z")
    levels = meta.get("supported_reasoning_levels", [])
    if not isinstance(levels, list) or not all(
            isinstance(x, str) or (isinstance(x, dict) and isinstance(x.get("effort"), str)) for x in levels):
        problems.append("'supported_reasoning_levels' must be a list of effort names or {\"effort\": …} objects")
    return problems
