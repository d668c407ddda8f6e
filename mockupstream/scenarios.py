"""What the mock upstream answers: request → IR events, no I/O.

The account key chooses a fault, the model name chooses the content. The
server (``server.py``) feeds the IR events to the real protocol encoder, so
every protocol gets the same scenario in its own wire format.

Faults, chosen by a marker anywhere in the API key (whatever the model), unless
the key has been healed (``POST /_mock/heal``, see ``server.py``):

=====================  ==========================================================
key contains           answer
=====================  ==========================================================
(no key)               401 "missing API key"
``fail-429``           429 rate limit, header ``Retry-After: 30``
``fail-429-<N>s``      the same with ``Retry-After: N`` (a cool-down short enough to watch end)
``fail-429-no-retry-after``  the same without ``Retry-After`` (the account is disabled, not cooled)
``fail-401``           401 invalid API key
``fail-402``           402 insufficient balance (payment required)
``fail-403-cost``      403 "... estimated cost exceeds the limit for this request"
``fail-403-tokens``    403 "... insufficient tokens ..."
``fail-500``           500 server error
``fail-400-echo-key``  400 whose message echoes the key it was sent, JSON-escaped
                       (``\\/`` for ``/``, every second character ``\\uXXXX``): an
                       upstream that repeats the credential in its error
``no-count-404``       count_tokens only: 404 (or ``no-count-405``, ``no-count-501``), as a
                       provider without the endpoint answers; everything else as a good key
``fail-stream-error``  streaming: 200, the start events, then the protocol's
                       in-stream rate-limit error (Anthropic ``rate_limit_error``, Chat an
                       ``error`` chunk, Responses ``response.failed`` with code
                       ``rate_limit_exceeded``) before any content, then the
                       connection closes; non-streaming: the 429 above
``rl<R>r[<T>t][<W>s]``  per-account rate limits (``mockupstream/ratelimits.py``): R requests
                       [and T input tokens] per W seconds (default 60), between ``-`` or
                       ``_`` (``sk-a-rl5r-1``); every answer carries what is left in the
                       protocol's rate-limit headers; past it a 429 with ``retry-after``.
                       ``POST /_mock/ratelimits`` sets limits for every key without a marker
=====================  ==========================================================

Content, chosen by the model name (any other name, e.g. ``mock-text``,
``gpt-5-mini`` or ``claude-sonnet-4-6``, gets the plain text):

=========================  =====================================================
model                      answer
=========================  =====================================================
(anything else)            "Hello! This is the mock upstream." in 6 deltas; usage
                           input = characters of the request's text // 4 (≥ 1),
                           output = number of deltas
``mock-tool``              one call to the request's first tool, arguments from
                           its JSON schema (string "Paris", number/integer 21,
                           boolean true, else null), id ``call_<hex>``, streamed
                           in fragments, finish tool_calls. When the last user
                           message holds tool results: text "Tool result
                           received: <their text, concatenated>", finish stop.
                           No tools in the request: plain text
``mock-parallel``          two calls (first and second tool, or the first twice),
                           distinct ids; same tool-result rule
``mock-shell``             for agent clients: one call to the request's shell tool
                           (``Bash``/``command``, ``exec_command``/``cmd``,
                           ``shell``/``command`` as argv) running the first
                           backtick-quoted text or ``echo …`` of the last user
                           prompt (default ``echo acc-tool-ok``, see
                           ``shell.py``), finish tool_calls. When the last user
                           message holds tool results: text "The command printed:
                           <their text>", finish stop. No shell tool: plain text
``mock-shell-reasoning``   ``mock-shell`` whose tool call comes after reasoning
                           signed for the account (as ``mock-reasoning``'s): an
                           agent's tool loop sends it back with the tool's result
``mock-reasoning``         reasoning "Let me think about this." in deltas with
                           a signature bound to the key (below), then the plain text; usage
                           reasoning_tokens = reasoning deltas
``mock-long``              200 text deltas
``mock-slow[-<N>x<MS>]``   N deltas (default 64), MS ms apart (default 20);
                           non-streaming answers after N × MS ms
``mock-delay-<MS>``        headers, then MS ms of silence, then the plain text
                           (non-streaming: answers after MS ms)
``mock-nonstandard``       Chat endpoint only (elsewhere plain text): chunks with
                           ``"object":"chat.completion"``, id
                           ``stream:chat:<uuid>``, model "", no role chunk, a
                           last chunk with finish_reason "stop", no
                           ``data: [DONE]``, then the connection closes
``mock-disconnect``        3 text deltas, then the connection is dropped (no
                           finish, no terminator; non-streaming: dropped
                           without a response)
``mock-truncated``         text deltas, then a clean end of the body without
                           finish reason or terminator
``mock-stall``             2 text deltas, then silence for 120 s or until the
                           client goes away, then the body ends without a finish
                           (non-streaming: 120 s of silence, then the JSON)
``mock-malformed``         2 text deltas, a line ``data: {not json``, 4 more
                           deltas, then the normal end
``mock-huge-<MB>``         MB megabytes of text in 256 KB deltas, written as fast
                           as the reader takes them (hostile-upstream tests)
``mock-huge-line-<MB>``    2 text deltas, then a ``data:`` line of MB megabytes
                           that never ends (non-streaming: the plain text)
``mock-too-long``          400: the prompt is over the context window, in the
                           protocol's own words (Anthropic's ``prompt is too long:
                           N tokens > M maximum``, OpenAI's ``maximum context
                           length`` with code ``context_length_exceeded``)
=========================  =====================================================

Per account key, whatever the model (the server applies these to every plan, :mod:`.promptcache`
and :mod:`.minted`):

=========================  =====================================================
what                       behaviour
=========================  =====================================================
prompt cache               Anthropic: the prefix up to each ``cache_control``
                           block is written (5 minutes refreshed on each hit,
                           or 1 hour with ``ttl: "1h"``) and read back by later
                           requests of the same key: ``cache_read_input_tokens``,
                           ``cache_creation_input_tokens``, ``cache_creation``;
                           OpenAI (Chat, Responses): prefixes of 1,024 tokens
                           or more in 128-token steps, unasked, read back as
                           ``cached_tokens``. TTL: ``--cache-ttl`` or
                           ``POST /_mock/cache``; per-key totals in
                           ``GET /_mock/stats`` under ``cache``
signatures                 ``mock-reasoning``'s signature (Anthropic thinking
                           ``signature``, Responses ``encrypted_content``) is
                           ``sig-<keyed digest of the key>-<hex>``; sent back
                           with another key it is refused 400 in the
                           provider's words ("Invalid `signature` in
                           `thinking` block"; ``invalid_encrypted_content``)
=========================  =====================================================

Whatever the model, a request whose last user message opens with the gateway's compaction
prompt (``gateway.endpoints.compaction.SUMMARY_PROMPT``, "You are compacting this conversation…") is
answered with the text ``Conversation summary: `` and the text of every earlier user message,
joined by `` | `` (a model that did as it was asked, in a form a test can check).

Non-streaming requests get ``render_response(fold(events))`` of the complete
answer, except where the table says otherwise.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Union

from translation import ir, sse
from translation.ids import new_id

from . import shell

HELLO = "Hello! This is the mock upstream."
THINKING = "Let me think about this."
FILLER = "The quick brown fox jumps over the lazy dog and keeps on running."
STALL_SECONDS = 120.0
MALFORMED_LINE = b"data: {not json\n\n"

MODELS = [
    "mock-text", "mock-tool", "mock-parallel", "mock-shell", "mock-shell-reasoning", "mock-reasoning", "mock-long", "mock-slow",
    "mock-delay-1000", "mock-nonstandard", "mock-disconnect", "mock-truncated", "mock-stall",
    "mock-malformed",
]

_SLOW = re.compile(r"mock-slow(?:-(\d+)x(\d+))?")
_HUGE = re.compile(r"mock-huge-(\d+)")
_HUGE_LINE = re.compile(r"mock-huge-line-(\d+)")
HUGE_DELTA = "x" * (256 * 1024)
_MEGABYTE_OF_X = b"x" * (1024 * 1024)
_DELAY = re.compile(r"mock-delay-(\d+)")
TOO_LONG_MODEL = "mock-too-long"


def too_long(proto: Any) -> dict[str, Any]:
    """The 400 body of a prompt over a 200,000-token window, as ``proto``'s API words it."""

    if proto.NAME == "anthropic":
        return {"type": "error", "error": {"type": "invalid_request_error",
                                           "message": "prompt is too long: 210345 tokens > 200000 maximum"}}
    return {"error": {"message": "This model's maximum context length is 200000 tokens. However, your messages "
                                 "resulted in 210345 tokens. Please reduce the length of the messages.",
                      "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}


# ----------------------------------------------------------------- faults


@dataclass(frozen=True)
class Fault:
    status: int
    message: str
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    in_stream: bool = False  # streaming requests get a 200 with an in-stream error instead


_RATE_LIMIT = Fault(429, "Rate limit reached for requests on this account. Please try again in 30s.",
                    "rate_limit_exceeded", {"Retry-After": "30"})

# Longest marker first, so that "fail-403-cost" is not read as another marker.
FAULTS: list[tuple[str, Fault]] = [
    ("fail-stream-error", Fault(429, _RATE_LIMIT.message, _RATE_LIMIT.code, _RATE_LIMIT.headers,
                                in_stream=True)),
    # Anthropic's real mid-stream failure; the default rules try the next account.
    ("fail-stream-overloaded", Fault(529, "Overloaded", "overloaded_error", in_stream=True)),
    ("fail-403-tokens", Fault(403, "Request rejected: insufficient tokens remaining on this account "
                                   "to serve the request.", "insufficient_tokens")),
    ("fail-403-cost", Fault(403, "Request rejected: the estimated cost exceeds the limit for this "
                                 "request.", "cost_limit_exceeded")),
    ("fail-429-no-retry-after", Fault(429, _RATE_LIMIT.message, _RATE_LIMIT.code)),
    ("fail-429", _RATE_LIMIT),
    ("fail-401", Fault(401, "Incorrect API key provided. You can find your API key in your "
                            "account settings.", "invalid_api_key")),
    ("fail-402", Fault(402, "Insufficient balance: your account has run out of credits. Please "
                            "add funds to continue (payment required).", "insufficient_balance")),
    ("fail-400-echo-key", Fault(400, "The key ECHO_KEY may not use this model.", "invalid_request")),
    ("fail-500", Fault(500, "The server had an error while processing your request. Sorry about "
                            "that!", "server_error")),
]

ECHO_KEY = "ECHO_KEY"  # in a fault's message: the key the request carried, as ``escaped_key`` spells it


def escaped_key(key: str) -> bytes:
    """``key`` as a JSON string's content, escaped as some encoders do and the rest as one may:
    ``/`` as ``\\/``, every second character as ``\\uXXXX``."""

    return "".join("\\/" if c == "/" else f"\\u{ord(c):04x}" if i % 2 else c
                   for i, c in enumerate(key)).encode()


MISSING_KEY = Fault(401, "Missing API key: send it as 'Authorization: Bearer <key>' or "
                         "'x-api-key: <key>'.", "missing_api_key")


_RETRY_AFTER = re.compile(r"fail-429-(\d+)s")


def fault_for_key(key: str) -> Fault | None:
    if match := _RETRY_AFTER.search(key):
        return Fault(429, _RATE_LIMIT.message, _RATE_LIMIT.code, {"Retry-After": match[1]})
    for marker, fault in FAULTS:
        if marker in key:
            return fault
    return None


_NO_COUNT_TOKENS = re.compile(r"no-count-(404|405|501)")


def missing_count_tokens(key: str) -> int | None:
    """``no-count-404`` (405, 501) in the key: count_tokens answers that status, as an
    Anthropic-compatible provider without the endpoint does; the other endpoints are unchanged."""

    match = _NO_COUNT_TOKENS.search(key)
    return int(match[1]) if match else None


_STREAM_ERROR_TYPES = {429: "rate_limit_error", 529: "overloaded_error"}


def stream_error(fault: Fault) -> ir.Error:
    """The in-stream error for ``fault``, rendered by each protocol's own encoder."""

    return ir.Error(message=fault.message, error_type=_STREAM_ERROR_TYPES.get(fault.status, "api_error"),
                    status=fault.status, code=fault.code)


# ----------------------------------------------------------------- plans


@dataclass(frozen=True)
class Pause:
    seconds: float


@dataclass(frozen=True)
class Raw:
    """Bytes written to the stream verbatim (not through the encoder)."""

    data: bytes


Step = Union[ir.Event, Pause, Raw]


class Ending(str, Enum):
    FINISH = "finish"  # the encoder's finish(): the protocol's normal ending
    TRUNCATE = "truncate"  # a clean end of the body, without finish() or terminator
    ABORT = "abort"  # drop the connection mid-body
    STALL = "stall"  # silence until the client goes away (at most STALL_SECONDS)


class JsonMode(str, Enum):
    ANSWER = "answer"
    ABORT = "abort"  # close the connection without a response
    STALL = "stall"  # wait STALL_SECONDS (or until the client goes away), then answer


@dataclass
class Plan:
    name: str
    steps: list[Step]  # what a stream carries, in order
    answer: list[ir.Event]  # the complete answer a non-streaming request gets (folded)
    ending: Ending = Ending.FINISH
    json_mode: JsonMode = JsonMode.ANSWER
    json_delay: float = 0.0
    close_connection: bool = False  # send "Connection: close" and close after the body
    nonstandard: bool = False  # Chat only: encode with NonstandardChatEncoder


def plan(req: ir.Request, protocol: str) -> Plan:
    """The content scenario for ``req`` arriving on ``protocol``'s endpoint."""

    model = req.model
    head = _head(req)
    if (summary := _summary(req)) is not None:
        return _simple(model, head + _text_answer(req, _pieces(summary)))
    match model:
        case "mock-tool" | "mock-parallel" if req.tools:
            return _tool_plan(req, head, parallel=model == "mock-parallel")
        case "mock-shell" | "mock-shell-reasoning" if (tool := shell.shell_tool(req)) is not None:
            return _shell_plan(req, head, tool, reasoning=model == "mock-shell-reasoning")
        case "mock-reasoning":
            return _simple(model, head + _reasoning_answer(req))
        case "mock-long":
            return _simple(model, head + _text_answer(req, _filler(200)))
        case "mock-nonstandard" if protocol == "openai_chat":
            p = _simple(model, head + _text_answer(req, _pieces(HELLO)))
            p.nonstandard = p.close_connection = True
            return p
        case "mock-disconnect":
            return _cut(model, head, req, 3, Ending.ABORT, JsonMode.ABORT)
        case "mock-truncated":
            return _cut(model, head, req, len(_pieces(HELLO)), Ending.TRUNCATE, JsonMode.ANSWER)
        case "mock-stall":
            return _cut(model, head, req, 2, Ending.STALL, JsonMode.STALL)
        case "mock-malformed":
            events = head + _text_answer(req, _pieces(HELLO))
            cut = len(head) + 3  # MessageStart(s), BlockStart, two deltas
            return Plan(model, [*events[:cut], Raw(MALFORMED_LINE), *events[cut:]], events)
    if m := _SLOW.fullmatch(model):
        count, ms = int(m[1] or 64), int(m[2] or 20)
        events = head + _text_answer(req, _filler(count))
        steps: list[Step] = []
        started = False
        for event in events:
            if isinstance(event, ir.BlockDelta):
                if started and ms:
                    steps.append(Pause(ms / 1000))
                started = True
            steps.append(event)
        return Plan(model, steps, events, json_delay=count * ms / 1000)
    if m := _HUGE.fullmatch(model):
        return _simple(model, head + _text_answer(req, [HUGE_DELTA] * (4 * int(m[1]))))
    if m := _HUGE_LINE.fullmatch(model):
        answer = head + _text_answer(req, _pieces(HELLO))
        line: list[Step] = [Raw(b"data: "), *[Raw(_MEGABYTE_OF_X)] * int(m[1])]
        return Plan(model, [*answer[:len(head) + 3], *line], answer, ending=Ending.TRUNCATE)
    if m := _DELAY.fullmatch(model):
        events = head + _text_answer(req, _pieces(HELLO))
        delay = int(m[1]) / 1000
        return Plan(model, [Pause(delay), *events], events, json_delay=delay)
    return _simple(model, head + _text_answer(req, _pieces(HELLO)))


def stream_error_plan(req: ir.Request, protocol: str, fault: Fault) -> Plan:
    """``fail-stream-error``: the start events, then the in-stream error, then close."""

    head = _head(req)
    return Plan("stream-error", [*head, stream_error(fault)], head, close_connection=True)


def _simple(name: str, events: list[ir.Event]) -> Plan:
    return Plan(name, list(events), events)


def _cut(name: str, head: list[ir.Event], req: ir.Request, deltas: int, ending: Ending,
         json_mode: JsonMode) -> Plan:
    """The first ``deltas`` text deltas of the plain answer, the block left open."""

    answer = head + _text_answer(req, _pieces(HELLO))
    steps: list[Step] = list(answer[: len(head) + 1 + deltas])
    if ending is Ending.ABORT:
        # Die a moment after the last delta, as a real upstream does mid-stream; data and
        # connection reset arriving in the same instant may reach a client as the reset alone.
        steps.append(Pause(0.1))
    return Plan(name, steps, answer, ending=ending, json_mode=json_mode)


# ----------------------------------------------------------------- answers


def _head(req: ir.Request) -> list[ir.Event]:
    return [ir.MessageStart(model=req.model, usage=ir.Usage(input_tokens=estimate_input_tokens(req)))]


def _text_answer(req: ir.Request, pieces: list[str], first_index: int = 0,
                 extra_output: int = 0, reasoning_tokens: int | None = None) -> list[ir.Event]:
    events: list[ir.Event] = [ir.BlockStart(first_index, "text")]
    events += [ir.BlockDelta(first_index, "text", piece) for piece in pieces]
    events.append(ir.BlockStop(first_index))
    events += _tail(req, len(pieces) + extra_output, ir.FinishReason.STOP, reasoning_tokens)
    return events


def _reasoning_answer(req: ir.Request) -> list[ir.Event]:
    pieces = _pieces(THINKING)
    events: list[ir.Event] = [ir.BlockStart(0, "reasoning")]
    events += [ir.BlockDelta(0, "reasoning", piece) for piece in pieces]
    events += [ir.BlockDelta(0, "signature", new_id("sig-")), ir.BlockStop(0)]
    return events + _text_answer(req, _pieces(HELLO), first_index=1, extra_output=len(pieces),
                                 reasoning_tokens=len(pieces))


def _tool_plan(req: ir.Request, head: list[ir.Event], parallel: bool) -> Plan:
    results = _last_tool_results(req)
    if results is not None:
        return _simple(req.model, head + _text_answer(req, _pieces("Tool result received: " + results)))
    tools = [req.tools[0], req.tools[1] if len(req.tools) > 1 else req.tools[0]] if parallel else req.tools[:1]
    events: list[ir.Event] = list(head)
    fragments = 0
    for index, tool in enumerate(tools):
        args = _fragments(sse.dumps(arguments_for(tool.parameters)))
        fragments += len(args)
        events.append(ir.BlockStart(index, "tool_call", id=new_id("call_"), name=tool.name))
        events += [ir.BlockDelta(index, "arguments", frag) for frag in args]
        events.append(ir.BlockStop(index))
    events += _tail(req, fragments, ir.FinishReason.TOOL_CALLS)
    return _simple(req.model, events)


def _shell_plan(req: ir.Request, head: list[ir.Event], tool: shell.ShellTool, reasoning: bool = False) -> Plan:
    results = _last_tool_results(req)
    if results is not None:
        return _simple(req.model, head + _text_answer(req, _pieces("The command printed: " + results)))
    args = _fragments(sse.dumps(tool.arguments(shell.marker_command(req))))
    events: list[ir.Event] = list(head)
    thought = _pieces(THINKING) if reasoning else []
    if reasoning:  # the server mints the signature for the account that answers (minted.bind)
        events += [ir.BlockStart(0, "reasoning"), *(ir.BlockDelta(0, "reasoning", p) for p in thought),
                   ir.BlockDelta(0, "signature", new_id("sig-")), ir.BlockStop(0)]
    at = 1 if reasoning else 0
    events.append(ir.BlockStart(at, "tool_call", id=new_id("call_"), name=tool.name))
    events += [ir.BlockDelta(at, "arguments", frag) for frag in args]
    events += [ir.BlockStop(at), *_tail(req, len(args) + len(thought), ir.FinishReason.TOOL_CALLS,
                                        len(thought) if reasoning else None)]
    return _simple(req.model, events)


def _tail(req: ir.Request, output_tokens: int, reason: ir.FinishReason,
          reasoning_tokens: int | None = None) -> list[ir.Event]:
    usage = ir.Usage(input_tokens=estimate_input_tokens(req), output_tokens=output_tokens,
                     reasoning_tokens=reasoning_tokens)
    return [usage, ir.Finish(reason)]


COMPACTION_ASK = "You are compacting this conversation"


def _user_texts(msg: ir.Message) -> str:
    return "".join(p.text for p in msg.parts if isinstance(p, ir.TextPart))


def _summary(req: ir.Request) -> str | None:
    """The summary a compaction request asks for; None for any other request."""

    users = [m for m in req.messages if m.role == "user"]
    if not users or not _user_texts(users[-1]).startswith(COMPACTION_ASK):
        return None
    earlier = [text for m in users[:-1] if (text := _user_texts(m).strip())]
    return "Conversation summary: " + " | ".join(earlier)


def _last_tool_results(req: ir.Request) -> str | None:
    """The concatenated tool result text of the last user message, None when it has none."""

    for msg in reversed(req.messages):
        if msg.role == "user":
            results = [p for p in msg.parts if isinstance(p, ir.ToolResultPart)]
            return "".join(p.text() for p in results) if results else None
    return None


def arguments_for(schema: Any) -> dict[str, Any]:
    """A plausible arguments object for a JSON schema's top-level properties."""

    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return {}
    return {name: _sample(prop) for name, prop in props.items()}


def _sample(prop: Any) -> Any:
    kind = prop.get("type") if isinstance(prop, dict) else None
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return {"string": "Paris", "number": 21, "integer": 21, "boolean": True}.get(kind)  # type: ignore[arg-type]


def estimate_input_tokens(req: ir.Request) -> int:
    """Characters of every text in the system prompt and messages, // 4, at least 1."""

    chars = sum(len(p.text) for p in req.system)
    for msg in req.messages:
        for part in msg.parts:
            if isinstance(part, ir.TextPart | ir.ReasoningPart):
                chars += len(part.text)
            elif isinstance(part, ir.ToolCallPart):
                chars += len(part.arguments)
            elif isinstance(part, ir.ToolResultPart):
                chars += len(part.text())
    return max(1, chars // 4)


def _pieces(text: str) -> list[str]:
    """Word-sized deltas that join back to ``text``."""

    words = text.split(" ")
    return [words[0], *(" " + w for w in words[1:])]


def _filler(count: int) -> list[str]:
    words = FILLER.split(" ")
    return [("" if i == 0 else " ") + words[i % len(words)] for i in range(count)]


def _fragments(text: str, parts: int = 4) -> list[str]:
    size = max(1, -(-len(text) // parts))
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


# ----------------------------------------------------------------- non-standard Chat wire


class NonstandardChatEncoder:
    """The non-standard Chat upstream: ``chat.completion`` objects, no role chunk, no [DONE].

    Same ``feed``/``finish`` shape as a protocol's StreamEncoder; text only.
    """

    def __init__(self) -> None:
        self.id = f"stream:chat:{uuid.uuid4()}"
        self.reason = "stop"
        self.final: dict[str, Any] | None = None  # Chat has no whole object at the end

    def feed(self, event: ir.Event) -> list[bytes]:
        if isinstance(event, ir.BlockDelta) and event.kind == "text":
            return [self._chunk({"content": event.text}, None)]
        if isinstance(event, ir.Finish) and event.reason == ir.FinishReason.TOOL_CALLS:
            self.reason = "tool_calls"
        return []

    def finish(self) -> list[bytes]:
        return [self._chunk({"content": ""}, self.reason)]

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None) -> bytes:
        return sse.encode(None, {
            "id": self.id, "object": "chat.completion", "created": int(time.time()), "model": "",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        })
