"""Responses ``tools`` / ``tool_choice`` ⇄ IR, both directions.

Function tools map to IR tools. A ``namespace`` tool (Codex's ``multi_agent_v1``,
its MCP servers) groups function tools; the IR has no namespaces, so each of its
functions becomes one plain function whose name joins the two:
``<namespace>__<name>`` (``multi_agent_v1__spawn_agent``), or ``<namespace><name>``
when the namespace already ends with ``_`` (Codex's ``mcp__server__`` prefixes), cut
to OpenAI's 64 characters with a hash when longer. The join is undone by looking the
name up in the client's own tool list (:func:`split_tool_name`), never by parsing it,
so that the Responses client gets back a ``function_call`` carrying ``namespace`` and
the inner name: Codex routes a call to a namespaced tool by that pair
(``ToolName::namespaced(namespace, name)`` in codex-rs' tool router).

A ``web_search`` tool becomes ``req.web_search``. Other built-in tools (file_search,
mcp, custom, local_shell, computer_use, image_generation, code_interpreter, …) are
recorded in ``req.dropped_tools`` so the gateway can log them, never rejected.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from .. import ir

_CHOICE_MODES: dict[str, Literal["auto", "none", "required"]] = {
    "auto": "auto", "none": "none", "required": "required"}
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
NAMESPACE_SEPARATOR = "__"
MAX_NAME = 64  # OpenAI's function name limit; Anthropic's is the same
WEB_SEARCH_TYPES = ("web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11")


def namespaced_name(namespace: str, name: str) -> str:
    """The one flat name of function ``name`` in ``namespace`` (see the module docstring)."""

    joined = namespace + name if namespace.endswith("_") else f"{namespace}{NAMESPACE_SEPARATOR}{name}"
    if len(joined) <= MAX_NAME:
        return joined
    digest = hashlib.sha256(joined.encode()).hexdigest()[:8]
    return f"{joined[:MAX_NAME - len(digest) - 1]}_{digest}"


def split_tool_name(name: str, client_tools: Any) -> tuple[str | None, str]:
    """``(namespace, name)`` a Responses client expects for the flat tool ``name``:
    the namespace is None unless ``name`` is one of its namespace tools' flat names."""

    if not isinstance(client_tools, list):
        return None, name
    for tool in client_tools:
        if not isinstance(tool, dict) or tool.get("type") != "namespace":
            continue
        namespace, inner = tool.get("name"), tool.get("tools")
        if not isinstance(namespace, str) or not isinstance(inner, list):
            continue
        for sub in inner:
            sub_name = sub.get("name") if isinstance(sub, dict) else None
            if isinstance(sub_name, str) and namespaced_name(namespace, sub_name) == name:
                return namespace, sub_name
    return None, name


def _fail(path: str, problem: str) -> ir.InvalidRequest:
    return ir.InvalidRequest(f"{path}: {problem}", path)


def _function(tool: dict[str, Any], path: str, namespace: str | None = None) -> ir.Tool:
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
    if namespace is not None:
        name = namespaced_name(namespace, name)
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
            namespace = tool.get("name")
            if not isinstance(namespace, str) or not namespace:
                raise _fail(f"{path}.name", "required string is missing")
            inner = tool.get("tools")
            if not isinstance(inner, list):
                raise _fail(f"{path}.tools", "must be an array")
            for j, sub in enumerate(inner):
                if not isinstance(sub, dict):
                    raise _fail(f"{path}.tools[{j}]", "must be an object")
                if sub.get("type") == "function":
                    tools.append(_function(sub, f"{path}.tools[{j}]", namespace))
                else:
                    dropped.append(_label(sub, str(sub.get("type"))))
        elif kind not in WEB_SEARCH_TYPES:  # web search: see parse_web_search
            dropped.append(_label(tool, kind))
    return tools, dropped


def parse_web_search(value: Any) -> ir.WebSearch | None:
    """The ``web_search`` tool, if the client offers one (its filters and location)."""

    if not isinstance(value, list):
        return None
    for tool in value:
        if isinstance(tool, dict) and tool.get("type") in WEB_SEARCH_TYPES:
            search = ir.WebSearch()
            filters = tool.get("filters")
            if isinstance(filters, dict) and isinstance(filters.get("allowed_domains"), list):
                search.allowed_domains = [d for d in filters["allowed_domains"] if isinstance(d, str)]
            location = tool.get("user_location")
            if isinstance(location, dict):
                search.user_location = {k: v for k, v in location.items() if k != "type" and v is not None}
            return search
    return None


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


def build_web_search(search: ir.WebSearch) -> dict[str, Any]:
    """The hosted tool; ``blocked_domains`` and ``max_uses`` have no Responses slot and are dropped."""

    tool: dict[str, Any] = {"type": "web_search"}
    if search.allowed_domains:
        tool["filters"] = {"allowed_domains": list(search.allowed_domains)}
    if search.user_location:
        tool["user_location"] = {"type": "approximate", **search.user_location}
    return tool


def build_tool_choice(choice: ir.ToolChoice) -> str | dict[str, Any]:
    if choice.mode == "named":
        return {"type": "function", "name": choice.name or ""}
    return choice.mode
