"""Upstream Responses SSE → IR events.

Events are correlated by ``output_index`` only: GitHub Copilot rotates item ids
between events and DeepSeek uses UUIDs. Each message content part becomes one IR
text block, a reasoning item one reasoning block (summary parts and raw
``reasoning_text`` alike, a blank line between parts, ``encrypted_content`` as a
signature at the item's end), a function call one tool_call block, and a built-in
item (web_search_call, mcp_call, …) one server_tool block carrying the finished item.
``.done`` events repeat what the deltas said; when they say more (LM Studio sends
arguments only in ``function_call_arguments.done``) the missing remainder is emitted.
A ``refusal`` part becomes a refusal block (and a completed response with one a REFUSAL
finish), ``output_text.delta`` logprobs a ``logprobs`` delta before its text, and
``output_text.annotation.added`` a citation delta (from the finished part when no event
announced its annotations).
At most one IR block is open: a new block closes the previous one, and a fragment for
a block already closed is malformed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .. import block_data, ir, sse
from ..sse import SSEEvent
from . import content
from .errors import failed_error, stream_error
from .response import RAW_PROTOCOL, reasoning_text
from .stop_reason import finish_from_status
from .usage import parse_usage

ItemKind = Literal["message", "reasoning", "function_call", "server_tool"]
_SEPARATOR = "\n\n"  # between reasoning summary parts
_LIFECYCLE = ("response.created", "response.in_progress", "response.queued")
_IGNORED = frozenset({
    *_LIFECYCLE,
    "response.reasoning_summary_part.added", "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.done", "response.reasoning_text.done",
})


class _Malformed(Exception):
    pass


@dataclass(eq=False)  # compared by identity: "is this the open block"
class _Block:
    index: int  # IR block index
    # Text / arguments emitted so far, in pieces: appending to one string copies it on every
    # delta, which made a long answer's stream slower the longer it ran.
    pieces: list[str] = field(default_factory=list)
    closed: bool = False
    kind: ir.BlockKind = "text"
    citations: int = 0  # citation deltas emitted
    logprobs: bool = False  # a logprobs delta emitted

    @property
    def text_kind(self) -> ir.DeltaKind:
        return "refusal" if self.kind == "refusal" else "text"

    @property
    def delivered(self) -> str:
        if len(self.pieces) > 1:
            self.pieces[:] = ["".join(self.pieces)]
        return self.pieces[0] if self.pieces else ""


@dataclass
class _Item:
    kind: ItemKind
    parts: dict[int, _Block] = field(default_factory=dict)  # message: content_index → block
    last_key: tuple[str, int] | None = None  # reasoning: the part the last delta belonged to


def _int(data: dict[str, Any], key: str, default: int | None = None) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Malformed(f"{data.get('type')}: {key} is not an integer")
    return value


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise _Malformed(f"{data.get('type')}: {key} is not a string")
    return value


def _dict(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise _Malformed(f"{data.get('type')}: {key} is not an object")
    return value


class ResponsesStreamDecoder:
    def __init__(self) -> None:
        self.unknown_events = 0
        self._started = False
        self._done = False
        self._next_index = 0
        self._open: _Block | None = None
        self._items: dict[int, _Item] = {}
        self._has_calls = False
        self._refused = False
        # The event fed last and its data as read: the passthrough tap reads a lifecycle event's
        # response object from it rather than parsing the event again (a completed response is the
        # whole answer). Held only until the next event; the decoder itself reads nothing of it later.
        self.last_read: tuple[SSEEvent, dict[str, Any]] | None = None

    # ------------------------------------------------------------ entry points

    def feed(self, event: SSEEvent) -> list[ir.Event]:
        if self._done or event.data.strip() == "[DONE]":
            return []
        out: list[ir.Event] = []
        try:
            data = sse.loads(event.data)
        except ValueError:
            return self._fail(out, "upstream sent an event that is not valid JSON")
        if not isinstance(data, dict):
            return self._fail(out, "upstream sent an event that is not a JSON object")
        self.last_read = (event, data)
        etype = data.get("type") if isinstance(data.get("type"), str) else event.event
        if not self._started:
            out.append(self._message_start(etype, data))
        try:
            self._dispatch(str(etype), data, out)
        except _Malformed as exc:
            return self._fail(out, f"malformed upstream event: {exc}")
        return out

    def delta(self, etype: str, data: dict[str, Any]) -> list[ir.Event] | None:
        """What ``feed`` makes of a plain content delta for the open block, from its parsed data
        (``etype`` being its ``type``), with the same state kept (the text delivered, which a
        ``.done`` event is checked against); None, having changed nothing, for anything else: a
        delta that opens a block or belongs to a closed one, logprobs, a reasoning delta for a new
        part, a field ``feed`` would find malformed (the caller feeds those)."""

        block = self._open
        index = data.get("output_index")
        if block is None or type(index) is not int:
            return None
        item = self._items.get(index)
        if item is None:
            return None
        kind: ir.DeltaKind
        match etype:
            case "response.output_text.delta" | "response.refusal.delta":
                part = data.get("content_index", 0)
                if item.kind != "message" or type(part) is not int or item.parts.get(part) is not block \
                        or data.get("logprobs"):
                    return None
                kind = block.text_kind
            case "response.reasoning_summary_text.delta" | "response.reasoning_text.delta":
                key = ("summary", data.get("summary_index", 0)) if etype == "response.reasoning_summary_text.delta" \
                    else ("content", data.get("content_index", 0))
                if item.kind != "reasoning" or item.parts[0] is not block or type(key[1]) is not int \
                        or key != item.last_key:
                    return None
                kind = "reasoning"
            case "response.function_call_arguments.delta":
                if item.kind != "function_call" or item.parts[0] is not block:
                    return None
                kind = "arguments"
            case _:
                return None
        text = data.get("delta")
        if type(text) is not str:
            return None
        if not text:
            return []
        block.pieces.append(text)
        return [ir.BlockDelta(block.index, kind, text)]

    def finish(self) -> list[ir.Event]:
        if self._done:
            return []
        out: list[ir.Event] = []
        if not self._started:
            out.append(self._message_start(None, {}))
        self._end(out, ir.transport_error(ir.TransportFailure.TRUNCATED,
                                              "upstream stream ended before completion"))
        return out

    # ------------------------------------------------------------ dispatch

    def _dispatch(self, etype: str, data: dict[str, Any], out: list[ir.Event]) -> None:
        match etype:
            case "response.output_item.added":
                self._item_added(data, out)
            case "response.output_item.done":
                self._item_done(_int(data, "output_index"), data.get("item"), out)
            case "response.content_part.added" | "response.content_part.done":
                self._content_part(etype, data, out)
            case "response.output_text.delta" | "response.refusal.delta":
                kind: ir.BlockKind = "text" if etype == "response.output_text.delta" else "refusal"
                block = self._text_block(_int(data, "output_index"), _int(data, "content_index", 0), out, kind)
                self._logprobs(block, data.get("logprobs"), out)
                self._deliver(block, block.text_kind, _text(data, "delta"), out)
            case "response.output_text.done" | "response.refusal.done":
                kind = "text" if etype == "response.output_text.done" else "refusal"
                block = self._text_block(_int(data, "output_index"), _int(data, "content_index", 0), out, kind)
                self._remainder(block, block.text_kind, data.get("text", data.get("refusal")), out)
            case "response.output_text.annotation.added":
                block = self._text_block(_int(data, "output_index"), _int(data, "content_index", 0), out)
                self._citation(block, data.get("annotation"), out)
            case "response.reasoning_summary_text.delta":
                self._reasoning_delta(data, ("summary", _int(data, "summary_index", 0)), out)
            case "response.reasoning_text.delta":
                self._reasoning_delta(data, ("content", _int(data, "content_index", 0)), out)
            case "response.function_call_arguments.delta":
                self._deliver(self._call_block(data), "arguments", _text(data, "delta"), out)
            case "response.function_call_arguments.done":
                self._remainder(self._call_block(data), "arguments", data.get("arguments"), out)
            case "response.completed" | "response.incomplete":
                self._completed(etype, _dict(data, "response"), out)
            case "response.failed":
                self._failed(_dict(data, "response"), out)
            case "error":
                self._end(out, stream_error(data))
            case _ if etype in _IGNORED:
                pass
            case _:
                index = data.get("output_index")
                item = self._items.get(index) if isinstance(index, int) else None
                if item is None or item.kind != "server_tool":
                    self.unknown_events += 1  # built-in item progress events are expected

    # ------------------------------------------------------------ blocks

    def _message_start(self, etype: str | None, data: dict[str, Any]) -> ir.MessageStart:
        self._started = True
        resp = data.get("response") if etype in _LIFECYCLE else None
        if not isinstance(resp, dict):
            return ir.MessageStart()
        rid, model = resp.get("id"), resp.get("model")
        return ir.MessageStart(id=rid if isinstance(rid, str) else None,
                               model=model if isinstance(model, str) else None)

    def _start(self, out: list[ir.Event], kind: ir.BlockKind, *, id: str | None = None,
               name: str | None = None, raw: dict[str, Any] | None = None) -> _Block:
        self._close(out)
        block = _Block(self._next_index, kind=kind)
        self._refused = self._refused or kind == "refusal"
        self._next_index += 1
        out.append(ir.BlockStart(index=block.index, kind=kind, id=id, name=name, raw=raw,
                                 raw_protocol=RAW_PROTOCOL if kind == "server_tool" else None))
        self._open = block
        return block

    def _close(self, out: list[ir.Event]) -> None:
        if self._open is not None:
            out.append(ir.BlockStop(index=self._open.index))
            self._open.closed = True
            self._open = None

    def _emit(self, block: _Block, kind: ir.DeltaKind, text: str, out: list[ir.Event]) -> None:
        if not text:
            return
        if block.closed:
            raise _Malformed(f"a {kind} fragment arrived for block {block.index} after it was closed")
        out.append(ir.BlockDelta(index=block.index, kind=kind, text=text))

    def _citation(self, block: _Block, annotation: Any, out: list[ir.Event]) -> None:
        data = content.citation_to_ir(annotation)
        if data is None or block.closed:
            self.unknown_events += 1  # an annotation type we do not know, or one for a finished part
            return
        block.citations += 1
        out.append(ir.BlockDelta(index=block.index, kind="citation", text="", data=data))

    def _logprobs(self, block: _Block, value: Any, out: list[ir.Event]) -> None:
        tokens = block_data.token_logprobs(value)
        if tokens and not block.closed:
            block.logprobs = True
            out.append(ir.BlockDelta(index=block.index, kind="logprobs", text="", data={"content": tokens}))

    def _final_part(self, block: _Block, final: ir.Block, out: list[ir.Event]) -> None:
        """A finished part: the text the deltas missed, and its annotations and logprobs
        when no event carried them."""

        if not block.logprobs and final.logprobs:
            self._logprobs(block, final.logprobs, out)
        self._remainder(block, block.text_kind, final.text, out)
        if not block.citations:
            for data in final.citations:
                self._citation(block, data["raw"], out)

    def _deliver(self, block: _Block, kind: ir.DeltaKind, text: str, out: list[ir.Event]) -> None:
        self._emit(block, kind, text, out)
        if text:
            block.pieces.append(text)

    def _remainder(self, block: _Block, kind: ir.DeltaKind, full: Any, out: list[ir.Event]) -> None:
        """A ``.done`` value: emit what the deltas did not deliver. When it disagrees with
        them (not an extension), the deltas the client already has stand."""

        if isinstance(full, str) and full.startswith(block.delivered):
            self._deliver(block, kind, full[len(block.delivered):], out)

    # ------------------------------------------------------------ items

    def _new_item(self, index: int, kind: ItemKind) -> _Item:
        item = _Item(kind)
        self._items[index] = item
        return item

    def _expect(self, index: int, kind: ItemKind) -> _Item | None:
        item = self._items.get(index)
        if item is not None and item.kind != kind:
            raise _Malformed(f"output {index} is a {item.kind}, not a {kind}")
        return item

    def _item_added(self, data: dict[str, Any], out: list[ir.Event]) -> None:
        index = _int(data, "output_index")
        item = data.get("item")
        if item is None:
            return  # an empty added event; the SDK tolerates it too
        if not isinstance(item, dict):
            raise _Malformed("response.output_item.added: item is not an object")
        if index in self._items:
            raise _Malformed(f"output {index} was added twice")
        match item.get("type"):
            case "message":
                self._new_item(index, "message")
            case "reasoning":
                self._start_reasoning(index, item, out)
            case "function_call":
                block = self._start_call(index, item, out)
                self._remainder(block, "arguments", item.get("arguments"), out)
            case _:
                self._new_item(index, "server_tool")  # emitted whole at output_item.done

    def _start_reasoning(self, index: int, item: dict[str, Any], out: list[ir.Event]) -> _Item:
        rid = item.get("id")
        entry = self._new_item(index, "reasoning")
        entry.parts[0] = self._start(out, "reasoning", id=rid if isinstance(rid, str) else None)
        return entry

    def _start_call(self, index: int, item: dict[str, Any], out: list[ir.Event]) -> _Block:
        call_id = item.get("call_id") or item.get("id")
        name = item.get("name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise _Malformed(f"function call {index} has no call_id or name")
        self._has_calls = True
        block = self._start(out, "tool_call", id=call_id, name=name)
        self._new_item(index, "function_call").parts[0] = block
        return block

    def _text_block(self, index: int, content_index: int, out: list[ir.Event],
                    kind: ir.BlockKind = "text") -> _Block:
        item = self._expect(index, "message") or self._new_item(index, "message")
        block = item.parts.get(content_index)
        if block is None:
            block = item.parts[content_index] = self._start(out, kind)
        return block

    def _content_part(self, etype: str, data: dict[str, Any], out: list[ir.Event]) -> None:
        index, content_index = _int(data, "output_index"), _int(data, "content_index", 0)
        part = _dict(data, "part")
        if part.get("type") == "reasoning_text":
            if index not in self._items:
                self._start_reasoning(index, {"id": data.get("item_id")}, out)
            return  # the reasoning block spans all its parts
        finals = content.blocks_of({"content": [part]})
        if not finals:
            return
        block = self._text_block(index, content_index, out, finals[0].kind)
        if etype == "response.content_part.done":
            self._final_part(block, finals[0], out)
        else:
            self._remainder(block, block.text_kind, finals[0].text, out)
        if etype == "response.content_part.done" and block is self._open:
            self._close(out)

    def _reasoning_delta(self, data: dict[str, Any], key: tuple[str, int], out: list[ir.Event]) -> None:
        index = _int(data, "output_index")
        item = self._expect(index, "reasoning") or self._start_reasoning(index, {"id": data.get("item_id")}, out)
        block = item.parts[0]
        if item.last_key is not None and key != item.last_key and block.pieces:
            self._deliver(block, "reasoning", _SEPARATOR, out)
        item.last_key = key
        self._deliver(block, "reasoning", _text(data, "delta"), out)

    def _call_block(self, data: dict[str, Any]) -> _Block:
        index = _int(data, "output_index")
        item = self._expect(index, "function_call")
        if item is None:
            raise _Malformed(f"function call arguments for output {index}, which was never added")
        return item.parts[0]

    def _item_done(self, index: int, item: Any, out: list[ir.Event]) -> None:
        if not isinstance(item, dict):
            raise _Malformed("response.output_item.done: item is not an object")
        match item.get("type"):
            case "message":
                self._expect(index, "message")
                parts = item.get("content")
                for ci, part in enumerate(parts if isinstance(parts, list) else []):
                    finals = content.blocks_of({"content": [part]})
                    if finals:
                        self._final_part(self._text_block(index, ci, out, finals[0].kind), finals[0], out)
                entry = self._items.get(index)
                if entry is not None and self._open in entry.parts.values():
                    self._close(out)
            case "reasoning":
                entry = self._expect(index, "reasoning") or self._start_reasoning(index, item, out)
                block = entry.parts[0]
                self._remainder(block, "reasoning", reasoning_text(item), out)
                signature = item.get("encrypted_content")
                self._emit(block, "signature", signature if isinstance(signature, str) else "", out)
                if block is self._open:
                    self._close(out)
            case "function_call":
                entry = self._expect(index, "function_call")
                block = entry.parts[0] if entry else self._start_call(index, item, out)
                self._remainder(block, "arguments", item.get("arguments"), out)
                if block is self._open:
                    self._close(out)
            case _:
                self._expect(index, "server_tool") or self._new_item(index, "server_tool")
                self._start(out, "server_tool", id=_opt_str(item.get("id")),
                            name=_opt_str(item.get("name")) or _opt_str(item.get("type")), raw=item)
                self._close(out)

    # ------------------------------------------------------------ endings

    def _completed(self, etype: str, resp: dict[str, Any], out: list[ir.Event]) -> None:
        output = resp.get("output")
        output = output if isinstance(output, list) else []
        if not self._items:
            # Nothing was streamed item by item: the final object is the whole answer.
            for position, item in enumerate(output):
                if isinstance(item, dict):
                    self._item_done(position, item, out)
        has_calls = self._has_calls or any(
            isinstance(i, dict) and i.get("type") == "function_call" for i in output)
        status = "completed" if etype == "response.completed" else "incomplete"
        details = resp.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        usage = parse_usage(resp.get("usage"))
        self._close(out)
        if usage is not None:
            out.append(usage)
        refused = self._refused or any(
            b.kind == "refusal" for i in output if isinstance(i, dict) and i.get("type") == "message"
            for b in content.blocks_of(i))
        finish = finish_from_status(status, reason, has_calls, refused)
        assert finish is not None
        out.append(finish)
        self._done = True

    def _failed(self, resp: dict[str, Any], out: list[ir.Event]) -> None:
        self._close(out)
        usage = parse_usage(resp.get("usage"))  # what the failed attempt cost, for accounting
        if usage is not None:
            out.append(usage)
        self._end(out, failed_error(resp))

    def _end(self, out: list[ir.Event], error: ir.Error) -> None:
        self._close(out)
        out.append(error)
        self._done = True

    def _fail(self, out: list[ir.Event], message: str) -> list[ir.Event]:
        if not self._started:
            out.append(self._message_start(None, {}))
        self._end(out, ir.transport_error(ir.TransportFailure.MALFORMED, message))
        return out


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
