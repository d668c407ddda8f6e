"""A passed-through Responses stream's output so far, for the ``response.failed`` that ends it.

The tap keeps each item as ``response.output_item.added`` announced it (and as
``.done`` completed it) and, for the item still open, the raw text of the events
that built it since; only when an ending is needed are they read, so a stream
that ends well never pays for this. The rebuilt item is marked ``incomplete``,
as the translated ending marks it: the SDKs check that the final response holds
what their running snapshots hold.
"""

from __future__ import annotations

import copy
from typing import Any

from ..passthrough import object_of


class PartialOutput:
    def __init__(self) -> None:
        self._items: dict[int, dict[str, Any]] = {}
        self._open: int | None = None
        self._pending: list[str] = []  # events of the open item, unread

    def item_event(self, name: str, data: str) -> None:
        if name in ("response.output_item.added", "response.output_item.done"):
            obj = object_of(data)
            index, item = obj.get("output_index"), obj.get("item")
            if isinstance(index, int) and isinstance(item, dict):
                self._items[index] = item
                self._open = index if name.endswith(".added") else None
            self._pending = []
        elif self._open is not None:
            self._pending.append(data)

    def delta(self, data: str) -> None:
        """``item_event`` for a content delta: its text kept, unread, while an item is open."""

        if self._open is not None:
            self._pending.append(data)

    def output(self) -> list[dict[str, Any]]:
        items = dict(self._items)
        if self._open is not None and self._open in items:
            items[self._open] = _rebuilt(items[self._open], self._pending)
        return [items[i] for i in sorted(items)]


def _rebuilt(announced: dict[str, Any], events: list[str]) -> dict[str, Any]:
    item = copy.deepcopy(announced)
    item["status"] = "incomplete"
    for data in events:
        event = object_of(data)
        kind = event.get("type")
        content = item.setdefault("content", []) if item.get("type") == "message" else item.get("content")
        ci = event.get("content_index")
        if kind == "response.content_part.added" and isinstance(event.get("part"), dict) and content is not None:
            content.append(copy.deepcopy(event["part"]))
        elif kind in ("response.output_text.delta", "response.refusal.delta") and content:
            part = content[ci] if isinstance(ci, int) and ci < len(content) else content[-1]
            key = "text" if kind == "response.output_text.delta" else "refusal"
            part[key] = str(part.get(key) or "") + str(event.get("delta") or "")
        elif kind == "response.output_text.annotation.added" and content:
            part = content[ci] if isinstance(ci, int) and ci < len(content) else content[-1]
            part.setdefault("annotations", []).append(event.get("annotation"))
        elif kind == "response.function_call_arguments.delta":
            item["arguments"] = str(item.get("arguments") or "") + str(event.get("delta") or "")
        elif kind == "response.reasoning_summary_part.added" and isinstance(event.get("part"), dict):
            item.setdefault("summary", []).append(copy.deepcopy(event["part"]))
        elif kind == "response.reasoning_summary_text.delta" and item.get("summary"):
            part = item["summary"][-1]
            part["text"] = str(part.get("text") or "") + str(event.get("delta") or "")
    return item
