"""The intermediate representation every protocol translates to and from.

Conventions that every protocol module relies on:

* Tool results live in ``user`` messages as ``ToolResultPart`` (Anthropic's
  shape); the Chat and Responses builders split them out into their own
  messages/items.
* ``Usage.input_tokens`` is the *total* prompt size (OpenAI's meaning); the
  cache fields are subsets of it. Anthropic reports them disjointly, so its
  decoder adds them up and its encoder subtracts them again.
* An opaque reasoning token (Anthropic ``signature``, Responses
  ``encrypted_content``) is carried in ``ReasoningPart.signature`` and in
  ``BlockDelta(kind="signature")`` so that it survives a round trip through a
  client of the other protocol.
* A message with role ``system`` sits *inside* the conversation (a client's
  mid-conversation system/developer message); leading ones go to
  ``Request.system``.
* Same-protocol exchanges do not go through the IR at all (the gateway passes
  them through with a tap). Between protocols, what the target can carry is
  carried; a part or item the IR cannot express becomes an :class:`OpaquePart`,
  which every builder of *another* protocol refuses with a 400 naming its type,
  never drops in silence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any, Literal, Union

JSON = dict[str, Any]


class FinishReason(str, Enum):
    STOP = "stop"
    LENGTH = "length"
    TOOL_CALLS = "tool_calls"
    CONTENT_FILTER = "content_filter"
    # The model declined (Anthropic stop_reason "refusal"; a Chat/Responses refusal part).
    REFUSAL = "refusal"
    # Anthropic's pause_turn: a server-side tool loop paused; nothing else has it.
    PAUSE = "pause"
    ERROR = "error"


# ----------------------------------------------------------------- request


@dataclass
class TextPart:
    text: str
    type: Literal["text"] = "text"


@dataclass
class ImagePart:
    """Either ``url`` (http(s) URL) or ``data`` (base64) with ``media_type``."""

    url: str | None = None
    data: str | None = None
    media_type: str | None = None
    detail: str | None = None
    type: Literal["image"] = "image"

    def as_url(self) -> str:
        if self.url is not None:
            return self.url
        return f"data:{self.media_type or 'image/png'};base64,{self.data or ''}"


@dataclass
class DocumentPart:
    """A file for the model to read: a PDF (``data`` base64 or ``url``) or plain text (``text``).

    Anthropic ``document``, Chat ``file`` part, Responses ``input_file``.
    """

    data: str | None = None
    url: str | None = None
    text: str | None = None
    media_type: str | None = None  # "application/pdf", "text/plain"
    filename: str | None = None
    title: str | None = None
    file_id: str | None = None  # a provider Files-API id: only meaningful to that provider
    context: str | None = None  # Anthropic ``context``: what the document is, for the model
    # Where the client sent it (e.g. "messages[0].content[1].source.file_id"), so that a
    # builder refusing a foreign ``file_id`` names the field.
    param: str | None = None
    type: Literal["document"] = "document"


@dataclass
class OpaquePart:
    """A block or item the IR cannot express, kept so that a builder of another
    protocol can refuse it by name (``kind``) instead of dropping it."""

    kind: str  # the wire type, e.g. "search_result", "bogus"
    protocol: str  # where it came from
    raw: JSON = field(default_factory=dict)
    param: str | None = None  # where the client sent it, e.g. "messages[1].content[0].type"
    type: Literal["opaque"] = "opaque"


@dataclass
class ToolCallPart:
    id: str
    name: str
    arguments: str  # JSON text, exactly as produced by the model
    type: Literal["tool_call"] = "tool_call"


@dataclass
class ToolResultPart:
    tool_call_id: str
    content: list[TextPart | ImagePart | DocumentPart]
    is_error: bool = False
    type: Literal["tool_result"] = "tool_result"

    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


@dataclass
class ReasoningPart:
    text: str = ""
    signature: str | None = None
    # Anthropic redacted_thinking payload; no other protocol can show it.
    redacted: str | None = None
    id: str | None = None
    type: Literal["reasoning"] = "reasoning"


@dataclass
class RefusalPart:
    """An assistant turn the model declined (Chat ``refusal``, Responses ``refusal`` part)."""

    text: str
    type: Literal["refusal"] = "refusal"


Part = Union[TextPart, ImagePart, DocumentPart, ToolCallPart, ToolResultPart, ReasoningPart, RefusalPart,
             OpaquePart]


@dataclass
class Message:
    role: Literal["user", "assistant", "system"]
    parts: list[Part]


@dataclass
class Tool:
    name: str
    description: str | None
    parameters: JSON


@dataclass
class ToolChoice:
    mode: Literal["auto", "none", "required", "named"]
    name: str | None = None
    disable_parallel: bool = False


@dataclass
class Reasoning:
    """What the client asked for; one of the two is usually set.

    ``enabled`` is False when the client explicitly turned thinking off.
    """

    enabled: bool = True
    effort: str | None = None
    budget_tokens: int | None = None


@dataclass
class WebSearch:
    """A provider-hosted web search tool (Responses ``web_search``, Anthropic ``web_search_*``)."""

    allowed_domains: list[str] = field(default_factory=list)
    blocked_domains: list[str] = field(default_factory=list)
    user_location: JSON | None = None  # {"city", "region", "country", "timezone"}
    max_uses: int | None = None


@dataclass
class ResponseFormat:
    """Structured output: Chat ``response_format``, Responses ``text.format``,
    Anthropic ``output_config.format``."""

    type: Literal["text", "json_object", "json_schema"]
    name: str | None = None
    schema: JSON | None = None
    strict: bool | None = None
    description: str | None = None


@dataclass
class Request:
    model: str
    messages: list[Message]
    system: list[TextPart] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)
    tool_choice: ToolChoice | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: list[str] = field(default_factory=list)
    reasoning: Reasoning | None = None
    stream: bool = False
    user: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None
    logprobs: bool = False
    top_logprobs: int | None = None
    choices: int = 1  # Chat ``n``: only a Chat upstream can answer with several
    prompt_cache_key: str | None = None
    web_search: WebSearch | None = None
    # Tools the source protocol had but the IR cannot express (e.g. Responses
    # file_search), and those a builder's target cannot take (web_search for Chat).
    # Kept only so the gateway can log what was dropped.
    dropped_tools: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class UpstreamCaps:
    """What the upstream provider accepts; the gateway passes it in."""

    thinking: bool = True
    cache_control: bool = True
    structured_output: bool = True  # Anthropic output_config.format
    # Anthropic thinking {"type": "adaptive"} + output_config.effort (Claude 4.6 and later);
    # False for the models before it, which take only a budget.
    adaptive_thinking: bool = True
    # Anthropic's request tags (top-level ``tags``, beta ``request-tags-2026-08-21``): Bedrock, Vertex
    # and compatible servers refuse them; they only label usage, so they are left out there.
    request_tags: bool = True
    # Anthropic: place cache breakpoints (cache_control) on a request built from another protocol, where
    # OpenAI would have cached the prompt's prefix unasked (translation.anthropic.breakpoints).
    cache_breakpoints: bool = False


# ----------------------------------------------------------------- stream events

BlockKind = Literal["text", "reasoning", "tool_call", "server_tool", "refusal"]
# "citation" and "logprobs" deltas carry their payload in ``BlockDelta.data`` (``text`` is "").
DeltaKind = Literal["text", "reasoning", "signature", "arguments", "redacted", "refusal", "citation", "logprobs"]


@dataclass
class MessageStart:
    id: str | None = None
    model: str | None = None
    usage: Usage | None = None  # input side, when the upstream knows it up front
    type: Literal["message_start"] = "message_start"


@dataclass
class BlockStart:
    index: int
    kind: BlockKind
    id: str | None = None  # tool call id / reasoning item id
    name: str | None = None  # tool name
    # server_tool: the protocol's own block/item, re-emitted verbatim only to a
    # client of the same protocol (``raw_protocol``).
    raw: JSON | None = None
    raw_protocol: str | None = None
    type: Literal["block_start"] = "block_start"


@dataclass
class BlockDelta:
    index: int
    kind: DeltaKind
    text: str
    # citation: {"type": "url_citation"|..., "url", "title", "cited_text", "start_index", "end_index",
    #            "raw": the source protocol's own object}; logprobs: {"content": [OpenAI token logprobs]}
    data: JSON | None = None
    type: Literal["block_delta"] = "block_delta"


@dataclass
class BlockStop:
    index: int
    type: Literal["block_stop"] = "block_stop"


@dataclass
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None  # cache reads, a subset of input_tokens
    cache_creation_tokens: int | None = None  # a subset of input_tokens
    # Of the cache writes, those kept for an hour (Anthropic's ``ttl: "1h"``, priced apart); the rest
    # are the default five-minute writes.
    cache_creation_1h_tokens: int | None = None
    reasoning_tokens: int | None = None  # a subset of output_tokens
    type: Literal["usage"] = "usage"

    def merge(self, other: Usage) -> Usage:
        """Later reports win field by field; missing fields keep what we had."""

        return Usage(
            input_tokens=_pick(other.input_tokens, self.input_tokens),
            output_tokens=_pick(other.output_tokens, self.output_tokens),
            cached_tokens=_pick(other.cached_tokens, self.cached_tokens),
            cache_creation_tokens=_pick(other.cache_creation_tokens, self.cache_creation_tokens),
            cache_creation_1h_tokens=_pick(other.cache_creation_1h_tokens, self.cache_creation_1h_tokens),
            reasoning_tokens=_pick(other.reasoning_tokens, self.reasoning_tokens),
        )


def _pick(new: int | None, old: int | None) -> int | None:
    return old if new is None else new


@dataclass
class Finish:
    reason: FinishReason
    raw: str | None = None  # the upstream's own value, kept for logs and same-protocol clients
    stop_sequence: str | None = None
    type: Literal["finish"] = "finish"


class TransportFailure(StrEnum):
    """How the exchange broke as the gateway saw it, as opposed to an error the upstream reported
    in its protocol. The values are the error types clients see for them."""

    DISCONNECTED = "upstream_disconnected"
    TIMEOUT = "upstream_timeout"
    TRUNCATED = "upstream_truncated"
    MALFORMED = "malformed_upstream"
    TOO_LARGE = "upstream_too_large"  # a line, an event or the whole answer past the gateway's bounds


@dataclass
class Error:
    """The upstream failed (error event, malformed chunk, truncation).

    ``status`` is the HTTP status the failure would have had, so that an error
    that arrives inside a 200 stream can be classified like a non-2xx answer.
    ``transport``: the connection or the stream itself broke (Healthchecks' ``permanent``
    idea, turned around): nothing after it can be trusted, the account is not to blame,
    and another account may do better. False for errors the upstream reported.
    """

    message: str
    error_type: str = "api_error"
    status: int = 502
    code: str | None = None
    param: str | None = None
    transport: bool = False
    type: Literal["error"] = "error"


def transport_error(kind: TransportFailure, message: str, status: int = 502) -> Error:
    return Error(message=message, error_type=kind.value, status=status, transport=True)


Event = Union[MessageStart, BlockStart, BlockDelta, BlockStop, Usage, Finish, Error]


# ----------------------------------------------------------------- response


@dataclass
class Block:
    kind: BlockKind
    text: str = ""  # text, reasoning text or tool arguments
    id: str | None = None
    name: str | None = None
    signature: str | None = None
    redacted: str | None = None
    raw: JSON | None = None
    raw_protocol: str | None = None
    citations: list[JSON] = field(default_factory=list)  # BlockDelta(kind="citation").data, in order
    logprobs: list[JSON] = field(default_factory=list)  # token logprobs, in order


@dataclass
class Response:
    id: str | None = None
    model: str | None = None
    blocks: list[Block] = field(default_factory=list)
    finish: Finish | None = None
    usage: Usage = field(default_factory=Usage)
    error: Error | None = None


class DecodeError(Exception):
    """An upstream body that cannot be understood."""


class InvalidRequest(Exception):
    """A client body that cannot be served; ``param`` names the offending field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
