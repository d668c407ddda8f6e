"""The full response object, echoing the client's own request.

Strict clients (Cherry Studio, Codex) validate every field of the object in
``response.created`` / ``response.completed`` and of a non-streamed answer, so it
carries the SOP's complete list: the client's values from ``ctx.body`` where it sent
them, else what the parsed ``ctx.request`` implies, else the API's defaults.
"""

from __future__ import annotations

from typing import Any

from .. import ir
from ..protocol import EncodeContext
from .tools import build_tool_choice, build_tools

# Echoed request fields and the API's defaults for them.
_DEFAULTS: dict[str, Any] = {
    "instructions": None,
    "metadata": {},
    "parallel_tool_calls": True,
    "temperature": 1.0,
    "tool_choice": "auto",
    "tools": [],
    "top_p": 1.0,
    "max_output_tokens": None,
    "previous_response_id": None,
    "reasoning": {"effort": None, "summary": None},
    "store": True,
    "truncation": "disabled",
    "user": None,
    "text": {"format": {"type": "text"}},
}


def _from_request(req: ir.Request) -> dict[str, Any]:
    """What a Responses body for ``req`` would have said, for the fields the IR keeps."""

    effort = None
    if req.reasoning is not None and req.reasoning.enabled:
        effort = req.reasoning.effort
    values: dict[str, Any] = {
        "instructions": "\n\n".join(p.text for p in req.system) or None,
        "metadata": dict(req.metadata),
        "parallel_tool_calls": req.parallel_tool_calls,
        "temperature": req.temperature,
        "tool_choice": build_tool_choice(req.tool_choice) if req.tool_choice else None,
        "tools": build_tools(req.tools),
        "top_p": req.top_p,
        "max_output_tokens": req.max_tokens,
        "reasoning": {"effort": effort, "summary": None} if effort else None,
        "user": req.user,
    }
    return {k: v for k, v in values.items() if v is not None}


def echoed_fields(ctx: EncodeContext) -> dict[str, Any]:
    fields = dict(_DEFAULTS)
    if ctx.request is not None:
        fields.update(_from_request(ctx.request))
    body = ctx.body if isinstance(ctx.body, dict) else {}
    for key in _DEFAULTS:
        if body.get(key) is not None:
            fields[key] = body[key]
    reasoning = fields["reasoning"]
    if isinstance(reasoning, dict):
        fields["reasoning"] = {"effort": None, "summary": None, **reasoning}
    return fields


def response_object(ctx: EncodeContext, response_id: str, status: str, output: list[dict[str, Any]],
                    usage: dict[str, Any] | None = None, error: dict[str, Any] | None = None,
                    incomplete_reason: str | None = None,
                    fields: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": ctx.created,
        "status": status,
        "model": ctx.model,
        "output": output,
        "usage": usage,
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        **(fields if fields is not None else echoed_fields(ctx)),
    }
