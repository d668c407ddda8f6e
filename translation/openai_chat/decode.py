"""Upstream Chat Completions SSE → IR events.

Chat has no block boundaries on the wire: a block opens when a delta of a new
kind (reasoning, text, a tool call index not seen before) arrives and closes when
another kind starts, so at most one block is open at a time. The finish reason is
held until the stream ends (``[DONE]`` or connection close) because usage, and
sometimes an error object (OpenRouter), still follow it.

``refusal`` deltas make a refusal block, ``choices[0].logprobs`` become ``logprobs`` deltas
just before the text they describe, and ``annotations`` (a search model's url citations,
indexed into the whole ``content``) become citation deltas on the open text block, indexed
from that block's start. A turn that stops after a refusal finishes as REFUSAL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .. import block_data, ids, ir, sse
from ..sse import SSEEvent
from . import stop_reason, url_citations
from .errors import error_from_object
from .usage import chunk_usage

TRUNCATED = "upstream stream ended before completion"


class Malformed(Exception):
    """A chunk this decoder cannot make sense of."""


@dataclass
class _Open:
    index: int  # IR block index
    kind: ir.BlockKind
    tool_key: int | None = None  # upstream tool call index, for tool blocks
    offset: int = 0  # text blocks: where the block starts in the message's whole content


class ChatStreamDecoder:
    def __init__(self) -> None:
        self.unknown_events = 0
        self._started = False
        self._done = False
        self._id: str | None = None
        self._model: str | None = None
        self._next_index = 0
        self._open: _Open | None = None
        self._tools: dict[int, tuple[int, str]] = {}  # upstream tool index → (IR index, call id)
        self._finish: ir.Finish | None = None
        self._content_len = 0  # characters of content so far: annotations index into all of it
        self._refused = False

    # ------------------------------------------------------------ entry points

    def feed(self, event: SSEEvent) -> list[ir.Event]:
        if self._done:
            return []
        out: list[ir.Event] = []
        data = event.data.strip()
        if data == "[DONE]":
            self._end(out)
            return out
        if event.event not in (None, "message", "error") or not data:
            self.unknown_events += 1
            return out
        try:
            chunk = sse.loads(data)
        except ValueError:
            if event.event == "error":
                self._fail(out, ir.Error(message=data[:2000], status=502))
            else:
                self._malformed(out, f"upstream chunk is not JSON: {data[:200]!r}")
            return out
        try:
            self._chunk(chunk, event.event == "error", out)
        except Malformed as exc:
            self._malformed(out, str(exc))
        return out

    def finish(self) -> list[ir.Event]:
        out: list[ir.Event] = []
        if not self._done:
            self._end(out)
        return out

    # ------------------------------------------------------------ one chunk

    def _chunk(self, chunk: Any, error_event: bool, out: list[ir.Event]) -> None:
        if not isinstance(chunk, dict):
            raise Malformed("upstream chunk is not a JSON object")
        self._note_identity(chunk)
        usage = chunk_usage(chunk)
        if error_event or chunk.get("error") is not None:
            if usage is not None:
                self._emit(out, usage)
            self._fail(out, error_from_object(chunk.get("error", chunk)))
            return
        choices = chunk.get("choices")
        if choices is None:
            choices = []
            if usage is None:
                self.unknown_events += 1
        if not isinstance(choices, list):
            raise Malformed("upstream chunk: choices is not an array")
        for choice in choices:
            if not isinstance(choice, dict):
                raise Malformed("upstream chunk: a choice is not an object")
            if choice.get("index", 0) == 0:  # only the first choice is served (n=1)
                self._choice(choice, out)
        if usage is not None:
            self._emit(out, usage)

    def _note_identity(self, chunk: dict[str, Any]) -> None:
        if self._id is None and isinstance(chunk.get("id"), str) and chunk["id"]:
            self._id = chunk["id"]
        if self._model is None and isinstance(chunk.get("model"), str) and chunk["model"]:
            self._model = chunk["model"]

    def _choice(self, choice: dict[str, Any], out: list[ir.Event]) -> None:
        delta = choice.get("delta")
        if delta is None:
            delta = {}
        if not isinstance(delta, dict):
            raise Malformed("upstream chunk: delta is not an object")
        reasoning = delta.get("reasoning_content")
        if reasoning is None:
            reasoning = delta.get("reasoning")  # Groq, OpenRouter
        logprobs = choice.get("logprobs")
        if not isinstance(logprobs, dict):
            logprobs = {}
        self._append(out, "reasoning", _text(reasoning, "reasoning"))
        self._append(out, "text", _text(delta.get("content"), "content"),
                     block_data.token_logprobs(logprobs.get("content")))
        self._append(out, "refusal", _text(delta.get("refusal"), "refusal"),
                     block_data.token_logprobs(logprobs.get("refusal")))
        notes = delta.get("annotations")
        for note in notes if isinstance(notes, list) else []:
            self._annotation(note, out)
        calls = delta.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                raise Malformed("upstream chunk: tool_calls is not an array")
            for position, call in enumerate(calls):
                self._tool_fragment(call, position, out)
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason and self._finish is None:
            self._finish = stop_reason.from_chat(reason)

    # ------------------------------------------------------------ blocks

    def _append(self, out: list[ir.Event], kind: Literal["text", "reasoning", "refusal"], text: str,
                logprobs: list[ir.JSON] | None = None) -> None:
        if not text and not logprobs:
            return
        if self._open is None or self._open.kind != kind:
            self._start_block(out, kind)
        assert self._open is not None
        if logprobs:
            self._emit(out, ir.BlockDelta(self._open.index, "logprobs", "", data={"content": logprobs}))
        if text:
            self._emit(out, ir.BlockDelta(self._open.index, kind, text))
        if kind == "text":
            self._content_len += len(text)
        elif kind == "refusal":
            self._refused = True

    def _annotation(self, note: Any, out: list[ir.Event]) -> None:
        if self._open is None or self._open.kind != "text":
            self._start_block(out, "text")  # a citation with no text block open: it gets an empty one
        assert self._open is not None
        data = url_citations.to_ir(note, self._open.offset)
        if data is None:
            self.unknown_events += 1  # not a url citation: Chat documents no other kind
            return
        self._emit(out, ir.BlockDelta(self._open.index, "citation", "", data=data))

    def _tool_fragment(self, call: Any, position: int, out: list[ir.Event]) -> None:
        if not isinstance(call, dict):
            raise Malformed("upstream chunk: a tool call is not an object")
        key = call.get("index", position)  # no index: its position in the array
        if isinstance(key, bool) or not isinstance(key, int):
            raise Malformed("upstream chunk: tool call index is not an integer")
        function = call.get("function") or {}
        if not isinstance(function, dict):
            raise Malformed("upstream chunk: tool call function is not an object")
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            arguments = sse.dumps(arguments)  # an object instead of JSON text
        call_id = call.get("id") if isinstance(call.get("id"), str) else ""
        known = self._tools.get(key)
        # A fresh non-empty id on a known index is a new call (compat layers that reuse index 0);
        # an empty or repeated id is a follow-up fragment (Qwen repeats id "" and type).
        if known is None or (call_id and call_id != known[1]):
            name = function.get("name")
            self._start_block(out, "tool_call", key, call_id or ids.new_id("call_"),
                              name if isinstance(name, str) else "")
        elif self._open is None or self._open.tool_key != key or self._open.index != known[0]:
            if arguments:
                raise Malformed(f"upstream sent arguments for tool call index {key} after it was closed")
            return  # an empty fragment for a closed call carries nothing
        if arguments:
            assert self._open is not None
            self._emit(out, ir.BlockDelta(self._open.index, "arguments", arguments))

    def _start_block(self, out: list[ir.Event], kind: ir.BlockKind, tool_key: int | None = None,
                     call_id: str | None = None, name: str | None = None) -> None:
        self._close(out)
        index = self._next_index
        self._next_index += 1
        self._open = _Open(index, kind, tool_key, offset=self._content_len)
        if tool_key is not None and call_id is not None:
            self._tools[tool_key] = (index, call_id)
        self._emit(out, ir.BlockStart(index, kind, id=call_id, name=name))

    def _close(self, out: list[ir.Event]) -> None:
        if self._open is not None:
            out.append(ir.BlockStop(self._open.index))
            self._open = None

    # ------------------------------------------------------------ outcome

    def _emit(self, out: list[ir.Event], event: ir.Event) -> None:
        if not self._started:
            self._started = True
            out.append(ir.MessageStart(id=self._id, model=self._model))
        out.append(event)

    def _end(self, out: list[ir.Event]) -> None:
        """Input is over: the held finish reason, or truncation."""

        if self._finish is None:
            self._fail(out, ir.transport_error(ir.TransportFailure.TRUNCATED, TRUNCATED))
            return
        self._close(out)
        if self._refused:
            self._finish = stop_reason.from_chat(self._finish.raw, refused=True)
        self._emit(out, self._finish)
        self._done = True

    def _fail(self, out: list[ir.Event], error: ir.Error) -> None:
        self._close(out)
        self._emit(out, error)
        self._done = True

    def _malformed(self, out: list[ir.Event], message: str) -> None:
        self._fail(out, ir.transport_error(ir.TransportFailure.MALFORMED, message))


def _text(value: Any, field: str) -> str:
    """A delta's text field: a string, null, or (Mistral and others) an array of text parts."""

    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, list):
        return "".join(p["text"] for p in value
                       if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str))
    raise Malformed(f"upstream chunk: delta.{field} is not a string")
