"""Chat ``usage`` ⇄ :class:`~translation.ir.Usage`.

Chat already uses the IR convention (``prompt_tokens`` is the whole prompt, cached
tokens a subset; ``completion_tokens`` includes reasoning), so only field names and
provider variants differ.
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
    """An upstream ``usage`` object; None when it is absent or not an object.

    Variants: ``prompt_tokens_details.cached_tokens`` (OpenAI) or ``prompt_cache_hit_tokens``
    (DeepSeek); ``completion_tokens_details.reasoning_tokens`` or a top-level
    ``reasoning_tokens`` (Azure AI Foundry). xAI reports ``completion_tokens`` *without*
    reasoning (its ``total_tokens`` = prompt + completion + reasoning); that is detected
    from the totals and corrected so that output includes reasoning.
    """

    if not isinstance(usage, dict):
        return None
    prompt = _int(usage.get("prompt_tokens"))
    completion = _int(usage.get("completion_tokens"))
    total = _int(usage.get("total_tokens"))
    cached = _int(_sub(usage.get("prompt_tokens_details"), "cached_tokens"))
    if cached is None:
        cached = _int(usage.get("prompt_cache_hit_tokens"))
    reasoning = _int(_sub(usage.get("completion_tokens_details"), "reasoning_tokens"))
    if reasoning is None:
        reasoning = _int(usage.get("reasoning_tokens"))
    if (prompt is not None and completion is not None and total is not None and reasoning
            and prompt + completion != total and prompt + completion + reasoning == total):
        completion += reasoning
    return ir.Usage(input_tokens=prompt, output_tokens=completion,
                    cached_tokens=cached, reasoning_tokens=reasoning)


def chunk_usage(chunk: dict[str, Any]) -> ir.Usage | None:
    """A streamed chunk's usage: top-level ``usage``, else Groq's ``x_groq.usage``."""

    usage = parse_usage(chunk.get("usage"))
    if usage is None:
        usage = parse_usage(_sub(chunk.get("x_groq"), "usage"))
    return usage


def render_usage(usage: ir.Usage) -> dict[str, Any]:
    """The Chat ``usage`` object; the detail objects only carry what is known."""

    prompt = usage.input_tokens or 0
    completion = usage.output_tokens or 0
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if usage.cached_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    if usage.reasoning_tokens is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    return out


def is_empty(usage: ir.Usage) -> bool:
    return all(v is None for v in (usage.input_tokens, usage.output_tokens,
                                   usage.cached_tokens, usage.reasoning_tokens))
