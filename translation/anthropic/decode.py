"""Upstream Messages SSE → IR events.

Anthropic's wire quirks handled here: ``data:`` JSON padded with spaces (the
JSON parser does not care), ``ping`` anywhere, a first ``input_json_delta``
that is ``""``, ``citations_delta`` (held, and emitted as citation deltas spanning the
block when it stops, once its length is known), usage totals that
grow on ``message_delta`` (``input_tokens`` may appear there too), a second
``message_start`` in spliced/duplicated streams (resets the index mapping,
never a second ``MessageStart``), ``event: error`` mid-stream and streams that
end without ``message_stop``. A ``refusal`` stop whose ``stop_details`` explain it gives
that explanation as a refusal block, so that OpenAI clients get it in their refusal slot.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from .. import ir, sse
from ..sse import SSEEvent
from . import citations, errors, stop_reason, usage
from .wire import NAME

_DELTA_KINDS: dict[str, tuple[str, ir.DeltaKind, ir.BlockKind]] = {
    # delta type → (payload field, IR delta kind, block kind it belongs to)
    "text_delta": ("text", "text", "text"),
    "thinking_delta": ("thinking", "reasoning", "reasoning"),
    "signature_delta": ("signature", "signature", "reasoning"),
    "input_json_delta": ("partial_json", "arguments", "tool_call"),
}


class _Malformed(Exception):
    """A chunk we cannot make sense of; ends the stream with a 502."""


@dataclass
class _OpenBlock:
    wire_index: int
    kind: ir.BlockKind
    ir_index: int | None  # None for a server block until it is emitted at its stop
    start_input: Any = None  # tool_use input given up front (some proxies send it whole)
    got_arguments: bool = False
    raw: dict[str, Any] | None = None  # server block, completed at its stop
    json_parts: list[str] = field(default_factory=list)
    text_len: int = 0  # text blocks: characters so far
    citations: list[Any] = field(default_factory=list)  # text blocks: wire citations, until the stop


class AnthropicStreamDecoder:
    def __init__(self) -> None:
        self.unknown_events = 0
        self._started = False
        self._finished = False
        self._done = False
        self._next_index = 0
        # Upstream block index (this message) → IR block index; None for a server block
        # whose IR index is only assigned when it is emitted at its stop.
        self._indexes: dict[int, int | None] = {}
        self._open: _OpenBlock | None = None
        self._usage: dict[str, int] = {}  # Anthropic-side totals, merged as they arrive
        # A message_start may already carry content and a stop reason (programmatic
        # tool calling sends a whole tool_use turn as message_start + message_stop).
        self._start_stop: ir.Finish | None = None

    # ------------------------------------------------------------- entry points

    def feed(self, event: SSEEvent) -> list[ir.Event]:
        if self._done or not event.data.strip():
            return []
        out: list[ir.Event] = []
        try:
            self._dispatch(self._payload(event), out)
        except _Malformed as exc:
            self._end(out, ir.transport_error(ir.TransportFailure.MALFORMED, str(exc)))
        return out

    def finish(self) -> list[ir.Event]:
        if self._done:
            return []
        out: list[ir.Event] = []
        if self._finished:
            self._close_open(out)
            self._done = True
            return out
        self._end(out, ir.transport_error(ir.TransportFailure.TRUNCATED,
                                              "upstream stream ended before completion"))
        return out

    # ------------------------------------------------------------- dispatch

    def _payload(self, event: SSEEvent) -> dict[str, Any]:
        try:
            payload = sse.loads(event.data)
        except ValueError:
            if event.event == "error":
                return {"type": "error", "error": {"type": "api_error", "message": event.data.strip()}}
            raise _Malformed(f"upstream sent invalid JSON: {event.data[:200]!r}") from None
        if not isinstance(payload, dict):
            raise _Malformed("upstream event is not a JSON object")
        if not isinstance(payload.get("type"), str):
            payload["type"] = event.event or ""
        return payload

    def _dispatch(self, payload: dict[str, Any], out: list[ir.Event]) -> None:
        match payload["type"]:
            case "ping":
                pass
            case "message_start":
                self._message_start(payload, out)
            case "content_block_start":
                self._block_start(payload, out)
            case "content_block_delta":
                self._block_delta(payload, out)
            case "content_block_stop":
                self._block_stop(payload, out)
            case "message_delta":
                self._message_delta(payload, out)
            case "message_stop":
                self._close_open(out)
                if not self._finished:
                    # An explicit end without message_delta: the usage and stop reason
                    # message_start carried, else the API's default.
                    out.append(usage.totals_to_ir(self._usage))
                    out.append(self._start_stop or stop_reason.to_ir(None))
                    self._finished = True
                self._done = True
            case "error":
                self._end(out, errors.error_from_event(payload))
            case _:
                self.unknown_events += 1

    # ------------------------------------------------------------- message

    def _message_start(self, payload: dict[str, Any], out: list[ir.Event]) -> None:
        message = payload.get("message")
        if not isinstance(message, dict):
            raise _Malformed("message_start without a message object")
        self._usage = usage.merge_wire({}, message.get("usage"))
        if self._started:
            # A spliced or duplicated stream: the new message's indexes start again at 0.
            self._close_open(out)
            self._indexes.clear()
            self._snapshot(message, out)
            return
        self._started = True
        input_side: ir.Usage | None = None
        if "input_tokens" in self._usage:
            full = usage.totals_to_ir(self._usage)
            input_side = ir.Usage(input_tokens=full.input_tokens, cached_tokens=full.cached_tokens,
                                  cache_creation_tokens=full.cache_creation_tokens)
        msg_id, model = message.get("id"), message.get("model")
        out.append(ir.MessageStart(id=msg_id if isinstance(msg_id, str) else None,
                                   model=model if isinstance(model, str) else None, usage=input_side))
        self._snapshot(message, out)

    def _snapshot(self, message: dict[str, Any], out: list[ir.Event]) -> None:
        """Content and stop reason that message_start already carries, as if streamed."""

        content = message.get("content")
        for index, block in enumerate(content if isinstance(content, list) else []):
            self._block_start({"type": "content_block_start", "index": index, "content_block": block}, out)
            self._close_open(out)
        raw, seq = message.get("stop_reason"), message.get("stop_sequence")
        if isinstance(raw, str):
            self._start_stop = stop_reason.to_ir(raw, seq if isinstance(seq, str) else None)

    def _message_delta(self, payload: dict[str, Any], out: list[ir.Event]) -> None:
        self._ensure_started(out)
        self._close_open(out)
        self._usage = usage.merge_wire(self._usage, payload.get("usage"))
        out.append(usage.totals_to_ir(self._usage))
        delta = payload.get("delta")
        raw = delta.get("stop_reason") if isinstance(delta, dict) else None
        if self._finished:
            return
        if isinstance(raw, str):
            assert isinstance(delta, dict)
            seq = delta.get("stop_sequence")
            self._explanation(raw, delta.get("stop_details"), out)
            out.append(stop_reason.to_ir(raw, seq if isinstance(seq, str) else None))
            self._finished = True
        elif self._start_stop is not None:
            out.append(self._start_stop)
            self._finished = True

    def _explanation(self, raw: str, details: Any, out: list[ir.Event]) -> None:
        text = details.get("explanation") if isinstance(details, dict) else None
        if raw != "refusal" or not isinstance(text, str) or not text:
            return
        index = self._next_index
        self._next_index += 1
        out.extend([ir.BlockStart(index=index, kind="refusal", raw=copy.deepcopy(details), raw_protocol=NAME),
                    ir.BlockDelta(index=index, kind="refusal", text=text), ir.BlockStop(index=index)])

    # ------------------------------------------------------------- blocks

    def _block_start(self, payload: dict[str, Any], out: list[ir.Event]) -> None:
        self._ensure_started(out)
        index = _index(payload)
        block = payload.get("content_block")
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise _Malformed(f"content_block_start {index} without a typed content_block")
        if index in self._indexes:
            raise _Malformed(f"content_block_start for block {index}, which was already started")
        self._close_open(out)
        self._indexes[index] = None
        match block["type"]:
            case "text":
                self._start(out, index, "text")
                self._delta(out, "text", block.get("text"))
                assert self._open is not None
                cited = block.get("citations")
                self._open.citations.extend(cited if isinstance(cited, list) else [])
            case "thinking":
                self._start(out, index, "reasoning")
                self._delta(out, "reasoning", block.get("thinking"))
                self._delta(out, "signature", block.get("signature"))
            case "redacted_thinking":
                self._start(out, index, "reasoning")
                self._delta(out, "redacted", block.get("data"))
            case "tool_use":
                block_id, name = block.get("id"), block.get("name")
                self._start(out, index, "tool_call", id=block_id if isinstance(block_id, str) else None,
                            name=name if isinstance(name, str) else None)
                assert self._open is not None
                self._open.start_input = block.get("input")
            case _:
                # Server-side blocks are emitted whole at their stop, once their input is complete.
                self._open = _OpenBlock(wire_index=index, kind="server_tool", ir_index=None,
                                        raw=copy.deepcopy(block))

    def _block_delta(self, payload: dict[str, Any], out: list[ir.Event]) -> None:
        index = _index(payload)
        delta = payload.get("delta")
        if not isinstance(delta, dict) or not isinstance(delta.get("type"), str):
            raise _Malformed(f"content_block_delta {index} without a typed delta")
        block = self._open
        if block is None or block.wire_index != index:
            state = "already closed" if index in self._indexes else "never started"
            raise _Malformed(f"content_block_delta for block {index}, which was {state}")
        kind = delta["type"]
        if kind == "citations_delta" and block.kind == "text":
            block.citations.append(delta.get("citation"))
            return
        if block.kind == "server_tool":
            self._server_delta(block, kind, delta)
            return
        if kind not in _DELTA_KINDS:
            self.unknown_events += 1
            return
        field_name, delta_kind, block_kind = _DELTA_KINDS[kind]
        if block.kind != block_kind:
            raise _Malformed(f"{kind} for a {block.kind} block {index}")
        text = delta.get(field_name)
        if not isinstance(text, str):
            raise _Malformed(f"{kind} for block {index} without a string {field_name}")
        if delta_kind == "arguments" and text:
            block.got_arguments = True
        self._delta(out, delta_kind, text)

    def _server_delta(self, block: _OpenBlock, kind: str, delta: dict[str, Any]) -> None:
        assert block.raw is not None
        if kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            block.json_parts.append(delta["partial_json"])
        elif kind == "compaction_delta":
            block.raw.update({k: v for k, v in delta.items() if k != "type"})
        else:
            self.unknown_events += 1

    def _block_stop(self, payload: dict[str, Any], out: list[ir.Event]) -> None:
        index = _index(payload)
        if self._open is not None and self._open.wire_index == index:
            self._close_open(out)
        elif index not in self._indexes:
            raise _Malformed(f"content_block_stop for block {index}, which was never started")
        # A repeated stop for a closed block changes nothing.

    # ------------------------------------------------------------- helpers

    def _ensure_started(self, out: list[ir.Event]) -> None:
        if not self._started:
            self._started = True
            out.append(ir.MessageStart())

    def _start(self, out: list[ir.Event], wire_index: int, kind: ir.BlockKind, *,
               id: str | None = None, name: str | None = None) -> None:
        ir_index = self._take_index(wire_index)
        self._open = _OpenBlock(wire_index=wire_index, kind=kind, ir_index=ir_index)
        out.append(ir.BlockStart(index=ir_index, kind=kind, id=id, name=name))

    def _take_index(self, wire_index: int) -> int:
        ir_index = self._next_index
        self._next_index += 1
        self._indexes[wire_index] = ir_index
        return ir_index

    def _delta(self, out: list[ir.Event], kind: ir.DeltaKind, text: Any) -> None:
        assert self._open is not None and self._open.ir_index is not None
        if isinstance(text, str) and text:
            out.append(ir.BlockDelta(index=self._open.ir_index, kind=kind, text=text))
            if kind == "text":
                self._open.text_len += len(text)

    def _close_open(self, out: list[ir.Event]) -> None:
        block, self._open = self._open, None
        if block is None:
            return
        if block.kind == "server_tool":
            if not self._done:
                self._emit_server_block(block, out)
            return
        assert block.ir_index is not None
        if block.kind == "tool_call" and not block.got_arguments and block.start_input:
            out.append(ir.BlockDelta(index=block.ir_index, kind="arguments", text=sse.dumps(block.start_input)))
        for data in citations.from_wire_list(block.citations, block.text_len):
            out.append(ir.BlockDelta(index=block.ir_index, kind="citation", text="", data=data))
        out.append(ir.BlockStop(index=block.ir_index))

    def _emit_server_block(self, block: _OpenBlock, out: list[ir.Event]) -> None:
        raw = block.raw or {}
        if block.json_parts:
            try:
                raw["input"] = sse.loads("".join(block.json_parts))
            except ValueError:
                pass  # incomplete input: keep what the start carried
        ir_index = self._take_index(block.wire_index)
        out.append(ir.BlockStart(index=ir_index, kind="server_tool", raw=raw, raw_protocol=NAME))
        out.append(ir.BlockStop(index=ir_index))

    def _end(self, out: list[ir.Event], error: ir.Error) -> None:
        """Close what is open, report ``error`` and stop listening."""

        self._ensure_started(out)
        self._done = True  # a half-received server block is not emitted
        self._close_open(out)
        out.append(error)


def _index(payload: dict[str, Any]) -> int:
    index = payload.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise _Malformed(f"{payload['type']} without a valid index")
    return index
