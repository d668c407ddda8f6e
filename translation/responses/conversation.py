"""Conversation state kept by the gateway: a request's own input as items, and the request a
``previous_response_id`` stands for once the conversation it names is written out.

Per the Responses API, a follow-up inherits the previous responses' input and output items, in
order, but not their ``instructions``. Reasoning keeps its signature (``encrypted_content``) only
towards the provider that signed it. Expanded for a Responses upstream that never saw the
conversation, items lose their ``id`` (an upstream accepts only ids it issued itself) and a
reasoning item without ``encrypted_content`` is left out (only its id could replay it).
"""

from __future__ import annotations

from typing import Any

from ..ids import new_id

_ID_PREFIX = {"message": "msg_", "function_call": "fc_", "function_call_output": "fco_", "reasoning": "rs_"}


def input_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    """``input`` as the list of items the API lists for it: a string is one user message; each item
    gets an id if it came without one (``input_items`` pages by id)."""

    value = body.get("input")
    raw: list[Any] = ([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]}]
                      if isinstance(value, str) else value if isinstance(value, list) else [])
    out: list[dict[str, Any]] = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        kind = item["type"] if isinstance(item.get("type"), str) else "message"
        if isinstance(item.get("id"), str) and item["id"]:
            out.append({"type": kind, **item})
        else:
            out.append({"type": kind, "id": new_id(_ID_PREFIX.get(kind, "item_")), **{
                k: v for k, v in item.items() if k != "id"}})
    return out


def unsigned(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``items`` without the reasoning signatures (``encrypted_content``) they carry: another
    provider's signature is refused by an upstream (it verifies only its own), the reasoning text stays."""

    return [{k: v for k, v in item.items() if k != "encrypted_content"} if item.get("type") == "reasoning" else item
            for item in items]


def replayable(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items as a Responses upstream that did not issue them accepts them back."""

    out = []
    for item in items:
        if item.get("type") == "reasoning" and not item.get("encrypted_content"):
            continue
        out.append({k: v for k, v in item.items() if k != "id"})
    return out


def expanded(body: dict[str, Any], prior: list[dict[str, Any]]) -> dict[str, Any]:
    """``body`` with the conversation written out: ``prior`` items, then its own input; no
    ``previous_response_id`` left for an upstream that would not know it."""

    out = {k: v for k, v in body.items() if k != "previous_response_id"}
    own = body.get("input", [])  # none: the conversation alone (a compaction by reference)
    if isinstance(own, str):
        own = [{"type": "message", "role": "user", "content": own}]
    if isinstance(own, list):  # anything else is left for the request's parser to refuse
        out["input"] = [*prior, *own]
    return out


def page(items: list[dict[str, Any]], limit: int, order: str, after: str | None,
         before: str | None) -> dict[str, Any]:
    """One page of ``items`` (oldest first) as the API's list endpoints give it: ``order`` "asc" or
    "desc"; ``after`` / ``before``: an item id, the page holds only the items after / before it in
    that order (an id not in the list matches nothing)."""

    ordered = items if order == "asc" else items[::-1]
    ids = [item.get("id") for item in ordered]
    start, end = 0, len(ordered)
    if after is not None:
        start = ids.index(after) + 1 if after in ids else len(ordered)
    if before is not None:
        end = ids.index(before) if before in ids else 0
    window = ordered[start:end]
    data = window[:limit]
    return {"object": "list", "data": data,
            "first_id": data[0].get("id") if data else None,
            "last_id": data[-1].get("id") if data else None,
            "has_more": len(window) > len(data)}
