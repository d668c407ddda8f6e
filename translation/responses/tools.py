"""Responses ``tools`` / ``tool_choice`` ⇄ IR, both directions.

Only function tools have an IR slot. A ``namespace`` tool groups function/custom
tools: its functions become plain functions under their own names (the IR has no
namespaces). Built-in tools (web_search, file_search, mcp, custom, local_shell,
computer_use, image_generation, code_interpreter, …) are recorded in
``req.dropped_tools`` so the gateway can log them, never rejected.
"""

from __future__ import annotations

from typing import Any, Literal

from .. import ir

_CHOICE_MODES: dict[str, Literal["auto", "none", "required"]] = {
    "auto": "auto", "none": "none", "required": "required"}
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def _fail(path: str, problem: str) -> ir.InvalidRequest:
    return ir.InvalidRequest(f"{path}: {problem}", path)


def _function(tool: dict[str, Any], path: str) -> ir.Tool:
    spec = tool
    if "name" not in tool and isinstance(tool.get("function"), dict):
        spec = tool["function"]  # Chat's shape, sent to /responses by some clients
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise _fail(f"{path}.name", "required string is missing")
    description = spec.get("description")
    if description is not None and not isinstance(description, str):
        raise _fail(f"{path}.description", "must be a string")
    parameters = spec.get("parameters")
    if parameters is None:
        parameters = dict(_EMPTY_SCHEMA)
    elif not isinstance(parameters, dict):
        raise _fail(f"{path}.parameters", "must be an object")
    return ir.Tool(name=name, description=description, parameters=parameters)


def _label(tool: dict[str, Any], kind: str) -> str:
    name = tool.get("name")
    return f"{kind}:{name}" if isinstance(name, str) and name else kind


def parse_tools(value: Any) -> tuple[list[ir.Tool], list[str]]:
    """``(function tools, labels of the dropped ones)``."""

    if value is None:
        return [], []
    if not isinstance(value, list):
        raise _fail("tools", "must be an array")
    tools: list[ir.Tool] = []
    dropped: list[str] = []
    for i, tool in enumerate(value):
        path = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise _fail(path, "must be an object")
        kind = tool.get("type")
        if not isinstance(kind, str):
            raise _fail(f"{path}.type", "required string is missing")
        if kind == "function":
            tools.append(_function(tool, path))
        elif kind == "namespace":
            inner = tool.get("tools")
            if not isinstance(inner, list):
                raise _fail(f"{path}.tools", "must be an array")
            for j, sub in enumerate(inner):
                if not isinstance(sub, dict):
                    raise _fail(f"{path}.tools[{j}]", "must be an object")
                if sub.get("type") == "function":
                    tools.append(_function(sub, f"{path}.tools[{j}]"))
                else:
                    dropped.append(_label(sub, str(sub.get("type"))))
        else:
            dropped.append(_label(tool, kind))
    return tools, dropped


def parse_tool_choice(value: Any) -> ir.ToolChoice | None:
    if value is None:
        return None
    if isinstance(value, str):
        if value not in _CHOICE_MODES:
            raise _fail("tool_choice", f"unknown value {value!r}")
        return ir.ToolChoice(mode=_CHOICE_MODES[value])
    if not isinstance(value, dict):
        raise _fail("tool_choice", "must be a string or an object")
    kind = value.get("type")
    if kind == "function":
        name = value.get("name")
        if not isinstance(name, str) or not name:
            raise _fail("tool_choice.name", "required string is missing")
        return ir.ToolChoice(mode="named", name=name)
    if not isinstance(kind, str):
        raise _fail("tool_choice.type", "required string is missing")
    # allowed_tools, or forcing a built-in tool we dropped: let the model choose.
    return ir.ToolChoice(mode="auto")


def build_tools(tools: list[ir.Tool]) -> list[dict[str, Any]]:
    # strict: False is Chat's default, and what the other protocols' schemas were written for.
    return [{"type": "function", "name": t.name, "description": t.description,
             "parameters": t.parameters, "strict": False} for t in tools]


def build_tool_choice(choice: ir.ToolChoice) -> str | dict[str, Any]:
    if choice.mode == "named":
        return {"type": "function", "name": choice.name or ""}
    return choice.mode
