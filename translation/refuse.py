"""The one refusal every builder raises for what its upstream protocol cannot carry.

Parsers keep what the IR cannot express as :class:`ir.OpaquePart`, and a document
that points into a provider's Files API keeps its ``file_id``. Builders only run
between different protocols, so both are foreign to the upstream: they are refused
here with a 400 that names the type and the client's own path (``param``), never
dropped in silence.
"""

from __future__ import annotations

from typing import NoReturn

from . import ir

# Protocol module name → how an error message calls it.
PROTOCOL_TITLES = {
    "openai_chat": "OpenAI Chat Completions",
    "anthropic": "Anthropic Messages",
    "responses": "OpenAI Responses",
}


def _title(protocol: str) -> str:
    return PROTOCOL_TITLES.get(protocol, protocol)


def _has_file_id(raw: ir.JSON) -> bool:
    source = raw.get("source")
    return "file_id" in raw or (isinstance(source, dict) and source.get("type") == "file")


def opaque(part: ir.OpaquePart, target: str) -> NoReturn:
    where = f"{part.param}: " if part.param else ""
    if _has_file_id(part.raw):
        problem = (f"a {part.kind!r} that refers to a file_id of the {_title(part.protocol)} Files API "
                   f"cannot be sent to an {_title(target)} upstream; send the file's data instead")
    else:
        problem = (f"content of type {part.kind!r} from an {_title(part.protocol)} request has no "
                   f"equivalent in the {_title(target)} protocol this model is served with")
    raise ir.InvalidRequest(where + problem, part.param)


def file_id(part: ir.DocumentPart, target: str) -> NoReturn:
    where = f"{part.param}: " if part.param else ""
    raise ir.InvalidRequest(
        f"{where}file_id {part.file_id!r} belongs to the client's provider's Files API and cannot be "
        f"sent to an {_title(target)} upstream; send the file's data (base64) instead", part.param)


def document_url(part: ir.DocumentPart, target: str) -> NoReturn:
    where = f"{part.param}: " if part.param else ""
    raise ir.InvalidRequest(
        f"{where}a document given by URL cannot be sent to an {_title(target)} upstream; "
        f"send the file's data (base64) instead", part.param)


def system_text(parts: list[ir.Part], target: str) -> list[ir.TextPart]:
    """The text of a mid-conversation system message; anything else in it is refused."""

    texts: list[ir.TextPart] = []
    for part in parts:
        if isinstance(part, ir.TextPart):
            texts.append(part)
        elif isinstance(part, ir.OpaquePart):
            opaque(part, target)
        else:
            param = part.param if isinstance(part, ir.DocumentPart) and part.param else "messages"
            unsupported(param, f"a {part.type} part in a system or developer message", target)
    return texts


def unsupported(param: str, what: str, target: str) -> NoReturn:
    raise ir.InvalidRequest(f"{param}: {what} is not supported by the {_title(target)} protocol "
                            f"this model is served with", param)


def several_choices(req: ir.Request, target: str) -> None:
    """Chat's ``n``: one request, several answers; no other protocol has it."""

    if req.choices > 1:
        unsupported("n", f"n={req.choices} (several choices per request)", target)
