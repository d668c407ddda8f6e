"""The model listing in each client's shape: OpenAI's, Anthropic's (paged) and Codex CLI's catalog.

- OpenAI (``GET /v1/models``, ``/v1/models/{id}``): ``{"object": "list", "data": [{"id", "object": "model",
  "created", "owned_by"}]}``; a retrieve is the one object.
- Anthropic, for a caller that authenticates the Anthropic way (``x-api-key``, or an
  ``anthropic-version`` header): ``{"data": [{"type": "model", "id", "display_name", "created_at"}],
  "has_more", "first_id", "last_id"}``, paged by ``limit`` (1–1000, default 20), ``after_id`` and
  ``before_id`` (Anthropic API reference, "List Models").
- Codex CLI, which asks ``GET /v1/models?client_version=0.169.0`` when its provider has a
  ``model_catalog_url``: ``{"models": [ModelInfo…]}`` (openai/codex, ``ModelsResponse``).

Codex replaces its own system prompt with a catalog entry's ``base_instructions``, and an
empty one leaves it with none (measured with Codex 0.169.0). So a model is in Codex's catalog
only when its alias's metadata gives ``base_instructions``; the others stay out, and Codex runs
them on its built-in metadata as it would without a catalog.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from accounts.model_metadata import parse_time

from ..edge.request import ApiRequest
from ..errors import InvalidRequest
from .models_list import ModelEntry

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # Anthropic: "an epoch value if the release date is unknown"
DEFAULT_LIMIT, MAX_LIMIT = 20, 1000

# What Codex 0.169.0 needs in every ModelInfo (it rejects the whole catalog when one lacks a field),
# set to what Codex assumes for a model it has no metadata for.
CODEX_DEFAULTS: dict[str, Any] = {
    "description": None,
    "supported_reasoning_levels": [],
    "shell_type": "default",
    "visibility": "list",
    "supported_in_api": True,
    "priority": 0,
    "supports_reasoning_summaries": False,
    "support_verbosity": False,
    "truncation_policy": {"mode": "bytes", "limit": 10_000},
    "supports_parallel_tool_calls": False,
    "experimental_supported_tools": [],
}


def wants_anthropic(request: ApiRequest) -> bool:
    """The caller speaks Anthropic's API: its key in ``x-api-key``, or an ``anthropic-version`` header."""

    return bool(request.header("x-api-key") or request.header("anthropic-version"))


def wants_codex(query: Mapping[str, Any]) -> bool:
    return "client_version" in query


def _created(entry: ModelEntry) -> datetime:
    value = entry.metadata.get("created_at")
    return (parse_time(value) if isinstance(value, str) else None) or EPOCH


def openai_model(entry: ModelEntry) -> dict[str, Any]:
    return {"id": entry.id, "object": "model", "created": int(_created(entry).timestamp()), "owned_by": entry.owner}


def openai_list(entries: list[ModelEntry]) -> dict[str, Any]:
    return {"object": "list", "data": [openai_model(e) for e in entries]}


def anthropic_model(entry: ModelEntry) -> dict[str, Any]:
    meta = entry.metadata
    model: dict[str, Any] = {
        "type": "model", "id": entry.id, "display_name": meta.get("display_name") or entry.id,
        "created_at": _created(entry).isoformat().replace("+00:00", "Z"), "lifecycle": "active",
    }
    if "context_window" in meta:
        model["max_input_tokens"] = meta["context_window"]
    if "max_output_tokens" in meta:
        model["max_tokens"] = meta["max_output_tokens"]
    return model


def _limit(query: Mapping[str, Any]) -> int:
    raw = query.get("limit")
    if raw is None:
        return DEFAULT_LIMIT
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"limit must be a whole number from 1 to {MAX_LIMIT}", param="limit")
    return limit


def anthropic_page(entries: list[ModelEntry], query: Mapping[str, Any]) -> dict[str, Any]:
    """One page of ``entries`` (sorted by id). The cursors compare as ids, so a cursor whose model has
    gone since the last page still finds its place."""

    limit = _limit(query)
    after, before = query.get("after_id"), query.get("before_id")
    if after is not None and before is not None:
        raise InvalidRequest("Send after_id or before_id, not both", param="before_id")
    if before is not None:
        earlier = [e for e in entries if e.id < before]
        page, has_more = earlier[-limit:], len(earlier) > limit
    else:
        later = [e for e in entries if after is None or e.id > after]
        page, has_more = later[:limit], len(later) > limit
    return {"data": [anthropic_model(e) for e in page], "has_more": has_more,
            "first_id": page[0].id if page else None, "last_id": page[-1].id if page else None}


def codex_model(entry: ModelEntry, priority: int) -> dict[str, Any]:
    meta = entry.metadata
    info = {**CODEX_DEFAULTS, "priority": priority, **meta, "slug": entry.id,
            "display_name": meta.get("display_name") or entry.id}
    info["supported_reasoning_levels"] = [
        {"effort": level, "description": level} if isinstance(level, str) else level
        for level in info["supported_reasoning_levels"]]
    return info


def codex_catalog(entries: list[ModelEntry]) -> dict[str, Any]:
    usable = [e for e in entries if e.metadata.get("base_instructions")]
    return {"models": [codex_model(e, i) for i, e in enumerate(usable)]}
