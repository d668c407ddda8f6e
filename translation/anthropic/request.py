"""A client's Messages body → IR request, with validation.

Strict where the Messages API is strict (types of the fields we read, roles,
block shapes), lenient where real clients send extras: fields the IR does not
model (``cache_control``, ``context_management``, ``top_k``, ``service_tier``,
``container``, ``mcp_servers``, …) are ignored, never a 400. Blocks the IR cannot
express (``search_result``, server tool blocks, ``container_upload``, a future
type) become :class:`ir.OpaquePart` with their path, for a builder of another
protocol to refuse by name; the same-protocol passthrough never sees the IR.
A ``role: "system"`` message inside ``messages`` (Claude Code's mid-conversation
system message) stays at its position as an IR system message.
"""

from __future__ import annotations

from typing import Any, Literal, NoReturn, TypeGuard

from .. import ir, sse

_ROLES = ("user", "assistant", "system")
PROTOCOL = "anthropic"
_RESULT_BLOCKS = ("text", "image", "document")
_ToolChoiceMode = Literal["auto", "none", "required", "named"]
# Messages tool_choice.type → IR mode (SOP table: any ⇄ required, tool ⇄ named).
_TOOL_CHOICE_MODES: dict[str, _ToolChoiceMode] = {"auto": "auto", "any": "required", "tool": "named", "none": "none"}


def _fail(param: str, problem: str) -> NoReturn:
    raise ir.InvalidRequest(f"{param}: {problem}", param)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _str(obj: dict[str, Any], key: str, param: str, *, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        _fail(f"{param}.{key}", "must be a string" if key in obj else "field required")
    return value


def _dict(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        _fail(param, "must be an object")
    return value


def _list(value: Any, param: str) -> list[Any]:
    if not isinstance(value, list):
        _fail(param, "must be an array")
    return value


def parse_request(body: Any) -> ir.Request:
    if not isinstance(body, dict):
        raise ir.InvalidRequest("request body must be a JSON object", None)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        _fail("model", "must be a non-empty string")
    max_tokens = body.get("max_tokens")
    if not _is_int(max_tokens) or max_tokens <= 0:
        _fail("max_tokens", "must be a positive integer")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        _fail("messages", "must be a non-empty array")
    if isinstance(messages[0], dict) and messages[0].get("role") == "system":
        # As the API: a mid-conversation system message follows a user turn.
        _fail("messages[0].role", "a system message cannot come first; use the top-level system field")

    req = ir.Request(model=model, messages=[_message(m, f"messages[{i}]") for i, m in enumerate(messages)],
                     max_tokens=max_tokens)
    req.system = _system(body.get("system"))
    _tools(body.get("tools"), req)
    _tool_choice(body.get("tool_choice"), req)
    req.reasoning = _reasoning(body.get("thinking"), body.get("output_config"))
    req.response_format = _response_format(body)
    _sampling(body, req)
    return req


# ----------------------------------------------------------------- messages


def _message(value: Any, param: str) -> ir.Message:
    msg = _dict(value, param)
    role = msg.get("role")
    if role not in _ROLES:
        _fail(f"{param}.role", f"must be one of {', '.join(_ROLES)}, got {role!r}")
    content = msg.get("content")
    if isinstance(content, str):
        return ir.Message(role, [ir.TextPart(content)])
    blocks = _list(content, f"{param}.content")
    parts: list[ir.Part] = []
    for j, block in enumerate(blocks):
        parts.extend(_block(block, role, f"{param}.content[{j}]"))
    return ir.Message(role, parts)


def _opaque(block: dict[str, Any], kind: str, param: str) -> ir.OpaquePart:
    return ir.OpaquePart(kind=kind, protocol=PROTOCOL, raw=block, param=f"{param}.type")


def _block(value: Any, role: str, param: str) -> list[ir.Part]:
    block = _dict(value, param)
    kind = block.get("type")
    if not isinstance(kind, str):
        _fail(f"{param}.type", "must be a string")
    if role == "system" and kind != "text":
        return [_opaque(block, kind, param)]
    if kind == "tool_result":
        if role != "user":
            _fail(f"{param}.type", "tool_result blocks are only allowed in user messages")
        return _tool_result(block, param)
    part = _known_block(block, kind, role, param)
    return [part] if part is not None else []


def _known_block(block: dict[str, Any], kind: str, role: str, param: str) -> ir.Part | None:
    match kind:
        case "text":
            return ir.TextPart(_str(block, "text", param) or "")
        case "image":
            return _image(block, param)
        case "document":
            return _document(block, param)
        case "tool_use":
            if role != "assistant":
                _fail(f"{param}.type", "tool_use blocks are only allowed in assistant messages")
            return _tool_use(block, param)
        case "thinking":
            text = _str(block, "thinking", param) or ""
            signature = _str(block, "signature", param, required=False)
            # Thinking only means something in assistant turns; elsewhere it is dropped.
            return ir.ReasoningPart(text=text, signature=signature or None) if role == "assistant" else None
        case "redacted_thinking":
            data = _str(block, "data", param) or ""
            return ir.ReasoningPart(redacted=data) if role == "assistant" else None
        case _:
            # search_result, server tool blocks and their results, container_upload, …
            return _opaque(block, kind, param)


def _image(block: dict[str, Any], param: str) -> ir.ImagePart | ir.OpaquePart:
    source = _dict(block.get("source"), f"{param}.source")
    kind = source.get("type")
    if kind == "base64":
        media_type = _str(source, "media_type", f"{param}.source")
        data = _str(source, "data", f"{param}.source")
        return ir.ImagePart(data=data, media_type=media_type)
    if kind == "url":
        return ir.ImagePart(url=_str(source, "url", f"{param}.source"))
    if isinstance(kind, str):
        return _opaque(block, "image", param)  # "file" (Files API) and future sources
    _fail(f"{param}.source.type", "must be a string")


def _document(block: dict[str, Any], param: str) -> ir.DocumentPart | ir.OpaquePart:
    """PDF (base64 or URL), plain text, or content blocks; ``citations`` has no other
    protocol's equivalent and is dropped."""

    where = f"{param}.source"
    source = _dict(block.get("source"), where)
    doc = ir.DocumentPart(title=_str(block, "title", param, required=False),
                          context=_str(block, "context", param, required=False))
    match source.get("type"):
        case "base64":
            doc.media_type = _str(source, "media_type", where)
            doc.data = _str(source, "data", where)
        case "url":
            doc.url = _str(source, "url", where)
            doc.media_type = "application/pdf"
        case "text":
            doc.text = _str(source, "data", where)
            doc.media_type = _str(source, "media_type", where, required=False) or "text/plain"
        case "content":
            text = _content_source_text(source.get("content"))
            if text is None:
                return _opaque(block, "document", param)  # images inside a document
            doc.text, doc.media_type = text, "text/plain"
        case "file":
            doc.file_id = _str(source, "file_id", where)
            doc.param = f"{where}.file_id"
        case other:
            if not isinstance(other, str):
                _fail(f"{where}.type", "must be a string")
            return _opaque(block, "document", param)
    return doc


def _content_source_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    if len(texts) != len(content) or not all(isinstance(t, str) for t in texts):
        return None
    return "\n\n".join(t for t in texts if isinstance(t, str))


def _tool_use(block: dict[str, Any], param: str) -> ir.ToolCallPart:
    call_id = _str(block, "id", param) or ""
    name = _str(block, "name", param) or ""
    arguments = block.get("input", {})
    if not isinstance(arguments, dict):
        _fail(f"{param}.input", "must be an object")
    return ir.ToolCallPart(id=call_id, name=name, arguments=sse.dumps(arguments))


def _tool_result(block: dict[str, Any], param: str) -> list[ir.Part]:
    """The result, then what it holds beyond text, images and documents (to be refused)."""

    call_id = _str(block, "tool_use_id", param) or ""
    is_error = block.get("is_error", False)
    if is_error is not None and not isinstance(is_error, bool):
        _fail(f"{param}.is_error", "must be a boolean")
    content = block.get("content")
    parts: list[ir.TextPart | ir.ImagePart | ir.DocumentPart] = []
    beside: list[ir.Part] = []
    if isinstance(content, str):
        parts.append(ir.TextPart(content))
    elif content is not None:
        for k, item in enumerate(_list(content, f"{param}.content")):
            where = f"{param}.content[{k}]"
            inner = _dict(item, where)
            kind = inner.get("type")
            if not isinstance(kind, str):
                _fail(f"{where}.type", "must be a string")
            inner_part = _known_block(inner, kind, "user", where) if kind in _RESULT_BLOCKS else None
            if isinstance(inner_part, (ir.TextPart, ir.ImagePart, ir.DocumentPart)):
                parts.append(inner_part)
            else:  # search_result, tool_reference, a Files-API image, …
                beside.append(inner_part if isinstance(inner_part, ir.OpaquePart) else _opaque(inner, kind, where))
    return [ir.ToolResultPart(tool_call_id=call_id, content=parts, is_error=bool(is_error)), *beside]


# ----------------------------------------------------------------- the rest


def _system(value: Any) -> list[ir.TextPart]:
    if value is None:
        return []
    if isinstance(value, str):
        return [ir.TextPart(value)] if value else []
    parts: list[ir.TextPart] = []
    for i, item in enumerate(_list(value, "system")):
        block = _dict(item, f"system[{i}]")
        if block.get("type") != "text":
            _fail(f"system[{i}].type", "system blocks must be of type text")
        parts.append(ir.TextPart(_str(block, "text", f"system[{i}]") or ""))
    return parts


def _tools(value: Any, req: ir.Request) -> None:
    if value is None:
        return
    for i, item in enumerate(_list(value, "tools")):
        param = f"tools[{i}]"
        tool = _dict(item, param)
        kind = tool.get("type")
        if kind is not None and not isinstance(kind, str):
            _fail(f"{param}.type", "must be a string")
        if kind is not None and kind.startswith("web_search_"):
            req.web_search = _web_search(tool, param)
            continue
        if kind not in (None, "custom"):
            # Server tools (bash_…, text_editor_…, code_execution_…, computer_…, mcp
            # toolsets): the IR cannot express them.
            req.dropped_tools.append(kind)
            continue
        name = _str(tool, "name", param) or ""
        description = _str(tool, "description", param, required=False)
        schema = _dict(tool.get("input_schema"), f"{param}.input_schema")
        req.tools.append(ir.Tool(name=name, description=description, parameters=schema))


def _web_search(tool: dict[str, Any], param: str) -> ir.WebSearch:
    search = ir.WebSearch()
    for key in ("allowed_domains", "blocked_domains"):
        domains = tool.get(key)
        if domains is not None:
            setattr(search, key, [d for d in _list(domains, f"{param}.{key}") if isinstance(d, str)])
    location = tool.get("user_location")
    if isinstance(location, dict):
        search.user_location = {k: v for k, v in location.items() if k != "type" and v is not None}
    max_uses = tool.get("max_uses")
    search.max_uses = max_uses if _is_int(max_uses) else None
    return search


def _tool_choice(value: Any, req: ir.Request) -> None:
    if value is None:
        return
    choice = _dict(value, "tool_choice")
    kind = choice.get("type")
    if not isinstance(kind, str) or kind not in _TOOL_CHOICE_MODES:
        _fail("tool_choice.type", f"must be one of {', '.join(_TOOL_CHOICE_MODES)}")
    name = _str(choice, "name", "tool_choice") if kind == "tool" else None
    disable = choice.get("disable_parallel_tool_use")
    if disable is not None and not isinstance(disable, bool):
        _fail("tool_choice.disable_parallel_tool_use", "must be a boolean")
    mode = _TOOL_CHOICE_MODES[kind]
    req.tool_choice = ir.ToolChoice(mode=mode, name=name, disable_parallel=bool(disable))
    if disable is not None:
        req.parallel_tool_calls = not disable


def _reasoning(thinking: Any, output_config: Any) -> ir.Reasoning | None:
    effort: str | None = None
    if isinstance(output_config, dict) and isinstance(output_config.get("effort"), str):
        effort = output_config["effort"]
    if thinking is None:
        return ir.Reasoning(effort=effort) if effort is not None else None
    config = _dict(thinking, "thinking")
    match config.get("type"):
        case "enabled":
            budget = config.get("budget_tokens")
            if not _is_int(budget) or budget <= 0:
                _fail("thinking.budget_tokens", "must be a positive integer")
            return ir.Reasoning(budget_tokens=budget, effort=effort)
        case "disabled":
            return ir.Reasoning(enabled=False)
        case "adaptive":
            return ir.Reasoning(effort=effort)
        case other:
            _fail("thinking.type", f"must be one of enabled, disabled, adaptive, got {other!r}")


def _response_format(body: dict[str, Any]) -> ir.ResponseFormat | None:
    """``output_config.format`` (GA) or the beta's top-level ``output_format``."""

    config = body.get("output_config")
    value = config.get("format") if isinstance(config, dict) else None
    param = "output_config.format"
    if value is None:
        value, param = body.get("output_format"), "output_format"
    if value is None:
        return None
    fmt = _dict(value, param)
    if fmt.get("type") != "json_schema":
        _fail(f"{param}.type", "must be json_schema")
    return ir.ResponseFormat(type="json_schema", schema=_dict(fmt.get("schema"), f"{param}.schema"))


def _sampling(body: dict[str, Any], req: ir.Request) -> None:
    for key in ("temperature", "top_p"):
        value = body.get(key)
        if value is None:
            continue
        if not _is_number(value):
            _fail(key, "must be a number")
        setattr(req, key, float(value))
    stops = body.get("stop_sequences")
    if stops is not None:
        for i, stop in enumerate(_list(stops, "stop_sequences")):
            if not isinstance(stop, str):
                _fail(f"stop_sequences[{i}]", "must be a string")
        req.stop = list(stops)
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        _fail("stream", "must be a boolean")
    req.stream = bool(stream)
    metadata = body.get("metadata")
    if metadata is not None:
        meta = _dict(metadata, "metadata")
        req.user = _str(meta, "user_id", "metadata", required=False)
