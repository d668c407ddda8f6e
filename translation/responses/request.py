"""A client's Responses body → :class:`ir.Request`, with validation.

``input`` is a string or a list of items. Assistant-side items (reasoning, assistant
messages, function calls) that follow each other become ONE IR assistant message;
``function_call_output`` items that follow each other, plus the user message right
after them, become ONE IR user message with the tool results first. Leading system and
developer messages go to ``req.system`` after ``instructions``; later ones stay in the
conversation as IR system messages. A ``function_call`` of a namespaced tool carries
the flat name the tool list gave it (:mod:`.tools`). Items and content parts the IR
cannot express (built-in tool calls and their outputs, ``item_reference``,
``input_audio``, a future type) become :class:`ir.OpaquePart` with their path, for a
builder of another protocol to refuse; the same-protocol passthrough never sees the IR.
"""

from __future__ import annotations

from typing import Any

from .. import documents, ir, sse
from .tools import namespaced_name, parse_tool_choice, parse_tools, parse_web_search

Invalid = ir.InvalidRequest

PROTOCOL = "responses"
_TEXT = ("input_text", "output_text", "text")
_ROLES = ("user", "assistant", "system", "developer")
LOGPROBS_INCLUDE = "message.output_text.logprobs"
_FORMATS = ("text", "json_object", "json_schema")
Content = ir.TextPart | ir.ImagePart | ir.DocumentPart | ir.RefusalPart | ir.OpaquePart


def _fail(path: str, problem: str) -> ir.InvalidRequest:
    return Invalid(f"{path}: {problem}", path)


def _str(obj: dict[str, Any], key: str, path: str, *, required: bool = False) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise _fail(f"{path}.{key}" if path else key, "required string is missing")
        return None
    if not isinstance(value, str):
        raise _fail(f"{path}.{key}" if path else key, "must be a string")
    return value


def _number(body: dict[str, Any], key: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(key, "must be a number")
    return float(value)


def _opaque(item: dict[str, Any], kind: str, path: str) -> ir.OpaquePart:
    return ir.OpaquePart(kind=kind, protocol=PROTOCOL, raw=item, param=f"{path}.type")


def _image(part: dict[str, Any], path: str) -> ir.ImagePart | ir.OpaquePart:
    """``input_image``: ``image_url`` is a data: URL or an http(s) URL; a ``file_id``
    refers to OpenAI's file store, which no other upstream can read: kept opaque."""

    url = part.get("image_url")
    if isinstance(url, dict):  # Chat's shape, sent by some clients
        url = url.get("url")
    detail = part.get("detail") if isinstance(part.get("detail"), str) else None
    if url is None:
        if isinstance(part.get("file_id"), str):
            return _opaque(part, "input_image", path)
        raise _fail(f"{path}.image_url", "required string is missing")
    if not isinstance(url, str):
        raise _fail(f"{path}.image_url", "must be a string")
    if url.startswith("data:"):
        head, sep, data = url[5:].partition(",")
        if not sep or ";base64" not in head:
            raise _fail(f"{path}.image_url", "data URL must be base64-encoded")
        return ir.ImagePart(data=data, media_type=head.split(";")[0] or None, detail=detail)
    return ir.ImagePart(url=url, detail=detail)


def _file(part: dict[str, Any], path: str) -> ir.DocumentPart:
    """``input_file``: ``file_data`` (a data: URL), ``file_url`` or ``file_id``."""

    name = _str(part, "filename", path)
    file_id = _str(part, "file_id", path)
    if file_id is not None:
        return ir.DocumentPart(file_id=file_id, filename=name, param=f"{path}.file_id")
    url = _str(part, "file_url", path)
    if url is not None:
        return ir.DocumentPart(url=url, media_type=documents.PDF, filename=name)
    data = _str(part, "file_data", path, required=True) or ""
    parsed = documents.parse_data_url(data)
    if parsed is None:  # bare base64, as some clients send it
        return ir.DocumentPart(data=data, media_type=documents.PDF, filename=name)
    media_type, payload = parsed
    return ir.DocumentPart(data=payload, media_type=media_type or documents.PDF, filename=name)


def _content(content: Any, path: str, *, images: bool) -> list[Content]:
    """A message's ``content``: a string or a list of typed parts."""

    if isinstance(content, str):
        return [ir.TextPart(content)]
    if not isinstance(content, list):
        raise _fail(path, "must be a string or an array of content parts")
    parts: list[Content] = []
    for j, part in enumerate(content):
        ppath = f"{path}[{j}]"
        if not isinstance(part, dict):
            raise _fail(ppath, "must be an object")
        ptype = part.get("type")
        if ptype in _TEXT:
            parts.append(ir.TextPart(_str(part, "text", ppath, required=True) or ""))
        elif ptype == "refusal":
            parts.append(ir.RefusalPart(_str(part, "refusal", ppath, required=True) or ""))
        elif ptype == "input_image":
            if not images:
                raise _fail(f"{ppath}.type", "input_image is not allowed here")
            parts.append(_image(part, ppath))
        elif ptype == "input_file":
            parts.append(_file(part, ppath))
        elif isinstance(ptype, str):  # input_audio, a future type
            parts.append(_opaque(part, ptype, ppath))
        else:
            raise _fail(f"{ppath}.type", "required string is missing")
    return parts


def _tool_output(output: Any, path: str) -> list[Content]:
    if isinstance(output, str):
        return [ir.TextPart(output)]
    if isinstance(output, list):
        return _content(output, path, images=True)
    raise _fail(path, "must be a string or an array of content parts")


def _reasoning(item: dict[str, Any], path: str) -> ir.ReasoningPart:
    texts: list[str] = []
    for key, part_type in (("summary", "summary_text"), ("content", "reasoning_text")):
        parts = item.get(key)
        if parts is None:
            continue
        if not isinstance(parts, list):
            raise _fail(f"{path}.{key}", "must be an array")
        found = []
        for j, part in enumerate(parts):
            if not isinstance(part, dict):
                raise _fail(f"{path}.{key}[{j}]", "must be an object")
            if part.get("type") == part_type:
                found.append(_str(part, "text", f"{path}.{key}[{j}]", required=True) or "")
        # Raw reasoning text only stands in when there is no summary (LM Studio, DeepSeek).
        if found and not texts:
            texts = found
    return ir.ReasoningPart(text="\n\n".join(texts), id=_str(item, "id", path),
                            signature=_str(item, "encrypted_content", path))


class _Conversation:
    """Builds the IR message list item by item, merging as the module docstring says."""

    def __init__(self) -> None:
        self.messages: list[ir.Message] = []
        self.system: list[ir.TextPart] = []
        self._results_open = False  # the last message holds only tool results so far

    def assistant(self, parts: list[ir.Part]) -> None:
        self._results_open = False
        if self.messages and self.messages[-1].role == "assistant":
            self.messages[-1].parts.extend(parts)
        else:
            self.messages.append(ir.Message("assistant", parts))

    def tool_result(self, part: ir.ToolResultPart, beside: list[ir.Part]) -> None:
        """``beside``: what the output held that a tool result cannot (to be refused)."""

        if self._results_open:
            self.messages[-1].parts.extend([part, *beside])
        else:
            self.messages.append(ir.Message("user", [part, *beside]))
            self._results_open = True

    def tool_result_opaque(self, part: ir.OpaquePart) -> None:
        if self._results_open:
            self.messages[-1].parts.append(part)
        else:
            self.user([part])

    def system_message(self, parts: list[ir.Part]) -> None:
        self._results_open = False
        self.messages.append(ir.Message("system", parts))

    def user(self, parts: list[ir.Part]) -> None:
        if self._results_open:
            self.messages[-1].parts.extend(parts)
        else:
            self.messages.append(ir.Message("user", parts))
        self._results_open = False

    def item(self, item: Any, path: str) -> None:
        if not isinstance(item, dict):
            raise _fail(path, "must be an object")
        itype = item.get("type", "message")
        if not isinstance(itype, str):
            raise _fail(f"{path}.type", "must be a string")
        if itype == "message":
            self._message(item, path)
        elif itype == "function_call":
            self.assistant([self._function_call(item, path)])
        elif itype == "function_call_output":
            if "output" not in item:
                raise _fail(f"{path}.output", "required")
            output = _tool_output(item["output"], f"{path}.output")
            content = [p for p in output if isinstance(p, (ir.TextPart, ir.ImagePart, ir.DocumentPart))]
            beside: list[ir.Part] = [p for p in output if isinstance(p, (ir.RefusalPart, ir.OpaquePart))]
            self.tool_result(ir.ToolResultPart(tool_call_id=_str(item, "call_id", path, required=True) or "",
                                               content=content), beside)
        elif itype == "reasoning":
            self.assistant([_reasoning(item, path)])
        elif itype.endswith("_output"):  # a built-in tool's result: the user side
            self.tool_result_opaque(_opaque(item, itype, path))
        else:  # item_reference, built-in tool calls, compaction, a future type
            self.assistant([_opaque(item, itype, path)])

    def _function_call(self, item: dict[str, Any], path: str) -> ir.ToolCallPart:
        arguments = item.get("arguments")
        if isinstance(arguments, (dict, list)):
            arguments = sse.dumps(arguments)
        elif not isinstance(arguments, str):
            raise _fail(f"{path}.arguments", "must be a string")
        name = _str(item, "name", path, required=True) or ""
        namespace = _str(item, "namespace", path)
        if namespace:
            name = namespaced_name(namespace, name)
        return ir.ToolCallPart(id=_str(item, "call_id", path, required=True) or "", name=name, arguments=arguments)

    def _message(self, item: dict[str, Any], path: str) -> None:
        role = item.get("role")
        if role not in _ROLES:
            raise _fail(f"{path}.role", f"unknown role {role!r}")
        if "content" not in item:
            raise _fail(f"{path}.content", "required")
        parts: list[ir.Part] = [*_content(item["content"], f"{path}.content", images=role == "user")]
        if role in ("system", "developer"):
            if not self.messages and all(isinstance(p, ir.TextPart) for p in parts):
                self.system.extend(p for p in parts if isinstance(p, ir.TextPart))
            else:
                self.system_message(parts)
        elif not parts:
            return
        elif role == "assistant":
            self.assistant(parts)
        else:
            self.user(parts)


def _input(body: dict[str, Any]) -> _Conversation:
    conv = _Conversation()
    value = body.get("input")
    if value is None:
        raise _fail("input", "required string or array is missing")
    if isinstance(value, str):
        conv.user([ir.TextPart(value)])
    elif isinstance(value, list):
        for i, item in enumerate(value):
            conv.item(item, f"input[{i}]")
    else:
        raise _fail("input", "must be a string or an array of items")
    return conv


def _reasoning_config(body: dict[str, Any]) -> ir.Reasoning | None:
    value = body.get("reasoning")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _fail("reasoning", "must be an object")
    effort = _str(value, "effort", "reasoning")
    if effort == "none":
        return ir.Reasoning(enabled=False)
    return ir.Reasoning(enabled=True, effort=effort)


def _response_format(body: dict[str, Any]) -> ir.ResponseFormat | None:
    text = body.get("text")
    if not isinstance(text, dict) or text.get("format") is None:
        return None
    fmt = text["format"]
    if not isinstance(fmt, dict):
        raise _fail("text.format", "must be an object")
    kind = fmt.get("type")
    if kind not in _FORMATS:
        raise _fail("text.format.type", f"must be one of {', '.join(_FORMATS)}")
    if kind != "json_schema":
        return ir.ResponseFormat(type=kind)
    schema = fmt.get("schema")
    if not isinstance(schema, dict):
        raise _fail("text.format.schema", "must be an object")
    strict = fmt.get("strict")
    return ir.ResponseFormat(type="json_schema", name=_str(fmt, "name", "text.format"), schema=schema,
                             strict=strict if isinstance(strict, bool) else None,
                             description=_str(fmt, "description", "text.format"))


def _top_logprobs(body: dict[str, Any]) -> int | None:
    value = body.get("top_logprobs")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail("top_logprobs", "must be a non-negative integer")
    return value


def _metadata(body: dict[str, Any]) -> dict[str, str]:
    value = body.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _fail("metadata", "must be an object")
    for key, item in value.items():
        if not isinstance(item, str):
            raise _fail(f"metadata.{key}", "must be a string")
    return dict(value)


def parse_request(body: Any) -> ir.Request:
    if not isinstance(body, dict):
        raise Invalid("request body must be a JSON object", None)
    model = _str(body, "model", "", required=True)
    if not model:
        raise _fail("model", "must not be empty")
    system: list[ir.TextPart] = []
    instructions = _str(body, "instructions", "")
    if instructions:
        system.append(ir.TextPart(instructions))
    conv = _input(body)
    tools, dropped = parse_tools(body.get("tools"))
    max_tokens = body.get("max_output_tokens")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)):
        raise _fail("max_output_tokens", "must be an integer")
    stream = body.get("stream", False)
    if not isinstance(stream, bool) and stream is not None:
        raise _fail("stream", "must be a boolean")
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise _fail("parallel_tool_calls", "must be a boolean")
    choice = parse_tool_choice(body.get("tool_choice"))
    if choice is not None and parallel is False:
        choice.disable_parallel = True
    # Of ``include`` only the logprobs entry means something to another protocol (encrypted
    # reasoning is asked for by the Responses builder itself); store, client_metadata (Codex),
    # service_tier, truncation, …: nothing another protocol takes, dropped.
    include = body.get("include")
    return ir.Request(
        model=model,
        messages=conv.messages,
        system=system + conv.system,
        tools=tools,
        tool_choice=choice,
        max_tokens=max_tokens,
        temperature=_number(body, "temperature"),
        top_p=_number(body, "top_p"),
        reasoning=_reasoning_config(body),
        stream=bool(stream),
        user=_str(body, "user", ""),
        metadata=_metadata(body),
        parallel_tool_calls=parallel,
        response_format=_response_format(body),
        logprobs=isinstance(include, list) and LOGPROBS_INCLUDE in include,
        top_logprobs=_top_logprobs(body),
        prompt_cache_key=_str(body, "prompt_cache_key", ""),
        web_search=parse_web_search(body.get("tools")),
        dropped_tools=dropped,
    )
