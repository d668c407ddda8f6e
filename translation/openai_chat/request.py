"""Client Chat Completions body → :class:`ir.Request` (with validation).

Leading system/developer messages become ``req.system``; later ones stay in the
conversation as IR system messages at their position. Content parts the IR cannot
express (``input_audio``, a future type) become :class:`ir.OpaquePart` with their
path, for a builder of another protocol to refuse: the same-protocol passthrough
sends the client's own body. Building the upstream body lives in :mod:`.build`.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from .. import ir
from .validate import fail, obj, opt_bool, opt_int, opt_list, opt_number, opt_str, req_str

_DATA_URL = re.compile(r"data:(?P<mt>[^;,]*)(?:;[^;,]*)*;base64,(?P<data>.*)", re.DOTALL)
_DEFAULT_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
PROTOCOL = "openai_chat"
_RESPONSE_FORMATS = ("text", "json_object", "json_schema")
_MODES: dict[str, Literal["auto", "none", "required"]] = {
    "auto": "auto", "none": "none", "required": "required"}


def parse_request(body: Any) -> ir.Request:
    if not isinstance(body, dict):
        raise ir.InvalidRequest("request body must be a JSON object", None)
    model = req_str(body, "model", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        fail("messages", "must be a non-empty array")
    n = opt_int(body, "n")
    if n is not None and n < 1:
        fail("n", "must be at least 1")

    conv = _Conversation()
    for i, message in enumerate(messages):
        conv.add(message, f"messages[{i}]")

    req = ir.Request(model=model, messages=conv.messages, system=conv.system, choices=n or 1)
    req.tools, req.dropped_tools = _tools(body)
    req.parallel_tool_calls = opt_bool(body, "parallel_tool_calls")
    req.tool_choice = _tool_choice(body)
    if req.tool_choice is not None and req.parallel_tool_calls is False:
        req.tool_choice.disable_parallel = True
    req.max_tokens = opt_int(body, "max_completion_tokens")
    if req.max_tokens is None:
        req.max_tokens = opt_int(body, "max_tokens")
    req.temperature = opt_number(body, "temperature")
    req.top_p = opt_number(body, "top_p")
    req.stop = _stop(body.get("stop"))
    req.reasoning = _reasoning(body)
    req.stream = bool(opt_bool(body, "stream"))
    req.user = opt_str(body, "user", "user")
    req.metadata = _metadata(body.get("metadata"))
    req.response_format = _response_format(body.get("response_format"))
    req.logprobs = bool(opt_bool(body, "logprobs"))
    req.top_logprobs = opt_int(body, "top_logprobs", minimum=0)
    req.prompt_cache_key = opt_str(body, "prompt_cache_key", "prompt_cache_key")
    req.web_search = _web_search(body.get("web_search_options"))
    return req


class _Conversation:
    """Chat messages → IR messages. Tool results live in user messages: a run of
    ``tool`` messages and the user message right after them become ONE IR user
    message (results first), so that roles alternate as Anthropic requires."""

    def __init__(self) -> None:
        self.messages: list[ir.Message] = []
        self.system: list[ir.TextPart] = []
        self._tool_turn: ir.Message | None = None  # a results message a user message may join

    def add(self, message: Any, path: str) -> None:
        message = obj(message, path)
        role = message.get("role")
        if not isinstance(role, str):
            fail(f"{path}.role", "must be a string")
        content = message.get("content")
        match role:
            case "system" | "developer":
                texts = _text_parts(content, f"{path}.content")
                if not self.messages and all(isinstance(p, ir.TextPart) for p in texts):
                    self.system.extend(p for p in texts if isinstance(p, ir.TextPart))
                else:
                    self._tool_turn = None
                    self.messages.append(ir.Message("system", [*texts]))
            case "user":
                self._add_user(_user_parts(content, f"{path}.content"))
            case "assistant":
                self._tool_turn = None
                parts = _assistant_parts(message, path)
                if parts:
                    self.messages.append(ir.Message("assistant", parts))
            case "tool":
                call_id = req_str(message, "tool_call_id", f"{path}.tool_call_id")
                texts = _text_parts(content, f"{path}.content")
                self._add_result(ir.ToolResultPart(call_id, [p for p in texts if isinstance(p, ir.TextPart)]))
                if self._tool_turn is not None:  # what a tool message cannot hold rides beside it
                    self._tool_turn.parts.extend(p for p in texts if isinstance(p, ir.OpaquePart))
            case "function":
                name = req_str(message, "name", f"{path}.name")
                text = opt_str(message, "content", f"{path}.content") or ""
                self._add_result(ir.ToolResultPart(name, [ir.TextPart(text)]))
            case _:
                fail(f"{path}.role", f"unknown role {role!r}")

    def _add_user(self, parts: list[ir.Part]) -> None:
        if self._tool_turn is not None:
            self._tool_turn.parts.extend(parts)
        else:
            self.messages.append(ir.Message("user", parts))
        self._tool_turn = None

    def _add_result(self, part: ir.ToolResultPart) -> None:
        if self._tool_turn is None:
            self._tool_turn = ir.Message("user", [])
            self.messages.append(self._tool_turn)
        self._tool_turn.parts.append(part)


def _opaque(part: dict[str, Any], path: str) -> ir.OpaquePart:
    kind = part.get("type")
    if not isinstance(kind, str):
        fail(f"{path}.type", "must be a string")
    return ir.OpaquePart(kind=kind, protocol=PROTOCOL, raw=part, param=f"{path}.type")


def _text_parts(content: Any, path: str) -> list[ir.TextPart | ir.OpaquePart]:
    """System, developer and tool content: a string or an array of text parts."""

    if isinstance(content, str):
        return [ir.TextPart(content)]
    if not isinstance(content, list):
        fail(path, "must be a string or an array of text parts")
    out: list[ir.TextPart | ir.OpaquePart] = []
    for j, part in enumerate(content):
        part = obj(part, f"{path}[{j}]")
        if part.get("type") == "text":
            out.append(ir.TextPart(req_str(part, "text", f"{path}[{j}].text", empty=True)))
        else:
            out.append(_opaque(part, f"{path}[{j}]"))
    return out


def _user_parts(content: Any, path: str) -> list[ir.Part]:
    if isinstance(content, str):
        return [ir.TextPart(content)]
    if not isinstance(content, list):
        fail(path, "must be a string or an array of content parts")
    out: list[ir.Part] = []
    for j, part in enumerate(content):
        where = f"{path}[{j}]"
        part = obj(part, where)
        kind = part.get("type")
        if kind == "text":
            out.append(ir.TextPart(req_str(part, "text", f"{where}.text", empty=True)))
        elif kind == "image_url":
            out.append(_image(part.get("image_url"), f"{where}.image_url"))
        elif kind == "file":
            out.append(_file(part.get("file"), f"{where}.file"))
        else:  # input_audio, a future type
            out.append(_opaque(part, where))
    return out


def _file(value: Any, path: str) -> ir.DocumentPart:
    """``{"file_data": "data:application/pdf;base64,…", "filename"}`` or ``{"file_id"}``."""

    spec = obj(value, path)
    filename = opt_str(spec, "filename", f"{path}.filename")
    file_id = opt_str(spec, "file_id", f"{path}.file_id")
    if file_id is not None:
        return ir.DocumentPart(file_id=file_id, filename=filename, param=f"{path}.file_id")
    data = req_str(spec, "file_data", f"{path}.file_data")
    match = _DATA_URL.fullmatch(data)
    if match is not None:
        return ir.DocumentPart(data=match["data"], media_type=match["mt"] or "application/pdf", filename=filename)
    return ir.DocumentPart(data=data, media_type="application/pdf", filename=filename)  # bare base64


def _image(value: Any, path: str) -> ir.ImagePart:
    detail = None
    if isinstance(value, dict):
        url = req_str(value, "url", f"{path}.url")
        detail = opt_str(value, "detail", f"{path}.detail")
    elif isinstance(value, str) and value:  # some clients send the URL itself
        url = value
    else:
        fail(f"{path}.url", "must be a non-empty string")
    if url.startswith("data:"):
        match = _DATA_URL.fullmatch(url)
        if match is None:
            fail(f"{path}.url", "a data: URL must be base64-encoded (data:<type>;base64,<data>)")
        return ir.ImagePart(data=match["data"], media_type=match["mt"] or None, detail=detail)
    if not url.startswith(("http://", "https://")):
        fail(f"{path}.url", "must be an http(s) URL or a data: URL")
    return ir.ImagePart(url=url, detail=detail)


def _assistant_parts(message: dict[str, Any], path: str) -> list[ir.Part]:
    parts: list[ir.Part] = []
    reasoning = message.get("reasoning_content")
    if reasoning is None:
        reasoning = message.get("reasoning")  # OpenRouter's spelling
    if isinstance(reasoning, str) and reasoning:
        parts.append(ir.ReasoningPart(text=reasoning))
    content = message.get("content")
    if isinstance(content, str):
        if content:
            parts.append(ir.TextPart(content))
    elif isinstance(content, list):
        for j, part in enumerate(content):
            where = f"{path}.content[{j}]"
            part = obj(part, where)
            kind = part.get("type")
            if kind == "text":
                parts.append(ir.TextPart(req_str(part, "text", f"{where}.text", empty=True)))
            elif kind == "refusal":
                parts.append(ir.RefusalPart(req_str(part, "refusal", f"{where}.refusal", empty=True)))
            else:
                parts.append(_opaque(part, where))
    elif content is not None:
        fail(f"{path}.content", "must be a string, an array of content parts or null")
    refusal = opt_str(message, "refusal", f"{path}.refusal")
    if refusal:
        parts.append(ir.RefusalPart(refusal))
    for k, call in enumerate(opt_list(message, "tool_calls", f"{path}.tool_calls")):
        parts.append(_tool_call(call, f"{path}.tool_calls[{k}]"))
    legacy = message.get("function_call")
    if legacy is not None:
        legacy = obj(legacy, f"{path}.function_call")
        name = req_str(legacy, "name", f"{path}.function_call.name")
        arguments = req_str(legacy, "arguments", f"{path}.function_call.arguments", empty=True)
        parts.append(ir.ToolCallPart(id=name, name=name, arguments=arguments))
    return parts


def _tool_call(call: Any, path: str) -> ir.ToolCallPart:
    call = obj(call, path)
    kind = call.get("type", "function")
    if kind != "function":
        fail(f"{path}.type", f"unsupported tool call type {kind!r}")
    function = obj(call.get("function"), f"{path}.function")
    return ir.ToolCallPart(
        id=req_str(call, "id", f"{path}.id"),
        name=req_str(function, "name", f"{path}.function.name"),
        arguments=req_str(function, "arguments", f"{path}.function.arguments", empty=True),
    )


def _tools(body: dict[str, Any]) -> tuple[list[ir.Tool], list[str]]:
    tools: list[ir.Tool] = []
    dropped: list[str] = []
    for i, tool in enumerate(opt_list(body, "tools", "tools")):
        tool = obj(tool, f"tools[{i}]")
        kind = req_str(tool, "type", f"tools[{i}].type")
        if kind != "function":
            dropped.append(kind)
            continue
        tools.append(_function(tool.get("function"), f"tools[{i}].function"))
    for i, function in enumerate(opt_list(body, "functions", "functions")):  # legacy
        tools.append(_function(function, f"functions[{i}]"))
    return tools, dropped


def _function(value: Any, path: str) -> ir.Tool:
    function = obj(value, path)
    parameters = function.get("parameters")
    if parameters is None:
        parameters = dict(_DEFAULT_PARAMETERS)
    elif not isinstance(parameters, dict):
        fail(f"{path}.parameters", "must be an object")
    return ir.Tool(name=req_str(function, "name", f"{path}.name"),
                   description=opt_str(function, "description", f"{path}.description"),
                   parameters=parameters)


def _tool_choice(body: dict[str, Any]) -> ir.ToolChoice | None:
    key = "tool_choice" if body.get("tool_choice") is not None else "function_call"
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        if value not in _MODES:
            fail(key, f"unknown value {value!r}")
        return ir.ToolChoice(_MODES[value])
    choice = obj(value, key)
    if key == "function_call":  # legacy {"name": ...}
        return ir.ToolChoice("named", name=req_str(choice, "name", "function_call.name"))
    kind = choice.get("type")
    if kind == "function":
        function = obj(choice.get("function"), "tool_choice.function")
        return ir.ToolChoice("named", name=req_str(function, "name", "tool_choice.function.name"))
    if kind == "allowed_tools":
        allowed = obj(choice.get("allowed_tools"), "tool_choice.allowed_tools")
        mode = allowed.get("mode", "auto")
        return ir.ToolChoice("required" if mode == "required" else "auto")
    fail("tool_choice.type", f"unsupported tool_choice type {kind!r}")


def _stop(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        fail("stop", "must be a string or an array of strings")
    return list(value)


def _reasoning(body: dict[str, Any]) -> ir.Reasoning | None:
    effort = opt_str(body, "reasoning_effort", "reasoning_effort")
    if effort is not None:
        return ir.Reasoning(enabled=False) if effort == "none" else ir.Reasoning(effort=effort)
    value = body.get("reasoning")  # OpenRouter: {"effort", "max_tokens", "enabled", "exclude"}
    if value is None:
        return None
    reasoning = obj(value, "reasoning")
    effort = opt_str(reasoning, "effort", "reasoning.effort")
    budget = opt_int(reasoning, "max_tokens", "reasoning.max_tokens")
    enabled = reasoning.get("enabled")
    if enabled is False or effort == "none":
        return ir.Reasoning(enabled=False)
    return ir.Reasoning(effort=effort, budget_tokens=budget)


def _response_format(value: Any) -> ir.ResponseFormat | None:
    if value is None:
        return None
    fmt = obj(value, "response_format")
    kind = fmt.get("type")
    if kind not in _RESPONSE_FORMATS:
        fail("response_format.type", f"must be one of {', '.join(_RESPONSE_FORMATS)}")
    if kind != "json_schema":
        return ir.ResponseFormat(type=kind)
    spec = obj(fmt.get("json_schema"), "response_format.json_schema")
    schema = spec.get("schema")
    if schema is not None and not isinstance(schema, dict):
        fail("response_format.json_schema.schema", "must be an object")
    return ir.ResponseFormat(type="json_schema", name=req_str(spec, "name", "response_format.json_schema.name"),
                             schema=schema, strict=opt_bool(spec, "strict", "response_format.json_schema.strict"),
                             description=opt_str(spec, "description", "response_format.json_schema.description"))


def _web_search(value: Any) -> ir.WebSearch | None:
    """``web_search_options`` (the search models' built-in search)."""

    if value is None:
        return None
    options = obj(value, "web_search_options")
    search = ir.WebSearch()
    location = options.get("user_location")
    if isinstance(location, dict) and isinstance(location.get("approximate"), dict):
        search.user_location = {k: v for k, v in location["approximate"].items() if v is not None}
    return search


def _metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    metadata = obj(value, "metadata")
    for key, item in metadata.items():
        if not isinstance(item, str):
            fail(f"metadata.{key}", "must be a string")
    return dict(metadata)
