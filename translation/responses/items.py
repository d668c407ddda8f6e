"""Output items as a Responses client sees them; shared by the JSON renderer and the encoder."""

from __future__ import annotations

from typing import Any, Literal

from ..ids import new_id
from .tools import split_tool_name

ItemStatus = Literal["in_progress", "completed", "incomplete"]


def message_id() -> str:
    return new_id("msg_")


def function_call_id() -> str:
    return new_id("fc_")


def reasoning_id(block_id: str | None) -> str:
    """A reasoning item keeps its upstream id when it is a Responses one, so that a
    client echoing the item back (with its encrypted content) is understood."""

    return block_id if block_id and block_id.startswith("rs_") else new_id("rs_")


def call_id(block_id: str | None) -> str:
    return block_id or new_id("call_")


def output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": []}


def message(item_id: str, texts: list[str], status: ItemStatus = "completed") -> dict[str, Any]:
    return {"type": "message", "id": item_id, "status": status, "role": "assistant",
            "content": [output_text(t) for t in texts]}


def summary_text(text: str) -> dict[str, Any]:
    return {"type": "summary_text", "text": text}


def reasoning(item_id: str, text: str, signature: str | None) -> dict[str, Any]:
    return {"type": "reasoning", "id": item_id,
            "summary": [summary_text(text)] if text else [],
            "encrypted_content": signature}


def function_call(item_id: str, call: str, name: str, arguments: str,
                  status: ItemStatus = "completed", client_tools: Any = None) -> dict[str, Any]:
    """``name`` is the IR's (flat) tool name; a call of one of the client's namespace
    tools is given back as ``namespace`` + inner ``name``, as Codex routes it."""

    namespace, name = split_tool_name(name, client_tools)
    item = {"type": "function_call", "id": item_id, "call_id": call, "name": name,
            "arguments": arguments, "status": status}
    if namespace is not None:
        item["namespace"] = namespace
    return item
