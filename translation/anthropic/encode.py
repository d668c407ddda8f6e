"""IR events → client Messages SSE.

``message_start`` → ``ping`` → blocks (each started once and stopped once, with
increasing indexes) → ``message_delta`` (stop reason and final usage, written
in :meth:`finish` because usage may come after the finish) → ``message_stop``.
A reasoning block is started on the wire only at its first delta, so that a
redacted one can be started as ``redacted_thinking`` with its data; a thinking
block always gets a ``signature_delta`` right before its stop (the SOP's rule).
A refusal block is Anthropic's refusal explanation: ``stop_details`` (``{"type": "refusal",
"category", "explanation"}``) beside ``stop_reason: "refusal"`` in the ``message_delta``, the
upstream's own object when it was Anthropic's. Citations go out as ``citations_delta`` on
their text block.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Literal, assert_never

from .. import ids, ir, sse
from ..encoder_base import EncoderBase
from ..protocol import EncodeContext
from . import citations, errors, stop_reason, usage
from .wire import NAME

_Mode = Literal["text", "tool", "server", "pending", "thinking", "redacted", "dropped", "refusal"]


@dataclass
class _Block:
    ir_index: int
    mode: _Mode
    wire_index: int | None = None
    signature: list[str] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)
    # Tool arguments are held back until they show they are a JSON object (see _arguments).
    held_arguments: list[str] = field(default_factory=list)
    streaming_arguments: bool = False
    text: list[str] = field(default_factory=list)  # text blocks: what was sent, for a citation's cited_text


MESSAGE_STOP = sse.encode("message_stop", {"type": "message_stop"})


def message_start(message_id: str, model: str, input_usage: dict[str, Any]) -> bytes:
    return sse.encode("message_start", {"type": "message_start", "message": {
        "id": message_id, "type": "message", "role": "assistant", "content": [],
        "model": model, "stop_reason": None, "stop_sequence": None, "usage": input_usage}})


def error_event(error: ir.Error) -> bytes:
    """The ``error`` event that ends a failed stream (``message_stop`` follows it)."""

    return sse.encode("error", {"type": "error", "error": {
        "type": errors.anthropic_type(error.status, error.error_type), "message": error.message}})


class AnthropicStreamEncoder(EncoderBase):
    def __init__(self, ctx: EncodeContext) -> None:
        super().__init__()
        self._ctx = ctx
        self._id = ctx.id or ids.new_id("msg_")
        self._started = False
        self._next_index = 0
        self._open: _Block | None = None
        self._refusal: list[str] = []  # refusal blocks' text, for stop_details
        self._refusal_raw: dict[str, Any] | None = None

    # ------------------------------------------------------------- entry points

    def _message_start(self, event: ir.MessageStart, out: list[bytes]) -> None:
        self._ensure_started(out)

    def _block_start(self, event: ir.BlockStart, out: list[bytes]) -> None:
        self._ensure_started(out)
        self._close(out)
        self._open_block(event, out)

    def _block_delta(self, event: ir.BlockDelta, out: list[bytes]) -> None:
        block = self._open
        if block is None or block.ir_index != event.index:
            return
        if event.kind == "citation" and event.data is not None and block.mode == "text":
            wire = citations.to_wire(event.data, "".join(block.text))
            if wire is not None:
                self._wire_delta(block, {"type": "citations_delta", "citation": wire}, out)
        elif event.text:
            self._delta(block, event, out)

    def _block_stop(self, event: ir.BlockStop, out: list[bytes]) -> None:
        if self._open is not None and self._open.ir_index == event.index:
            self._close(out)

    def _end(self, finish: ir.Finish, out: list[bytes]) -> None:
        self._ensure_started(out)
        self._close(out)
        reason = stop_reason.from_ir(finish)
        delta: dict[str, Any] = {"stop_reason": reason, "stop_sequence": stop_reason.stop_sequence_of(finish, reason)}
        details = self._stop_details()
        if details is not None:
            delta["stop_details"] = details
        out.append(sse.encode("message_delta", {
            "type": "message_delta", "delta": delta, "usage": usage.from_ir(self._usage),
        }))
        out.append(MESSAGE_STOP)

    def _stop_details(self) -> dict[str, Any] | None:
        return stop_reason.stop_details(self._refusal_raw, "".join(self._refusal))

    # ------------------------------------------------------------- message

    def _ensure_started(self, out: list[bytes]) -> None:
        if self._started:
            return
        self._started = True
        input_side = ir.Usage(input_tokens=self._usage.input_tokens, cached_tokens=self._usage.cached_tokens,
                              cache_creation_tokens=self._usage.cache_creation_tokens,
                              cache_creation_1h_tokens=self._usage.cache_creation_1h_tokens)
        out.append(message_start(self._id, self._ctx.model, usage.from_ir(input_side)))
        out.append(sse.encode("ping", {"type": "ping"}))

    def _error_ending(self, error: ir.Error, out: list[bytes]) -> None:
        self._ensure_started(out)
        self._close(out)
        out.append(error_event(error))
        out.append(MESSAGE_STOP)

    # ------------------------------------------------------------- blocks

    def _open_block(self, event: ir.BlockStart, out: list[bytes]) -> None:
        match event.kind:
            case "text":
                block = _Block(event.index, "text")
                self._wire_start(block, {"type": "text", "text": ""}, out)
            case "refusal":
                block = _Block(event.index, "refusal")  # no block: it goes out as stop_details
                if event.raw_protocol == NAME and isinstance(event.raw, dict):
                    self._refusal_raw = event.raw
            case "tool_call":
                block = _Block(event.index, "tool")
                self._wire_start(block, {"type": "tool_use", "id": event.id or ids.new_id("toolu_"),
                                         "name": event.name or "", "input": {}}, out)
            case "reasoning":
                block = _Block(event.index, "pending")  # started at its first delta
            case "server_tool":
                if event.raw_protocol == NAME and isinstance(event.raw, dict):
                    block = _Block(event.index, "server")
                    self._wire_start(block, copy.deepcopy(event.raw), out)
                else:
                    block = _Block(event.index, "dropped")  # another protocol's item: no Anthropic shape
            case _:
                assert_never(event.kind)
        self._open = block

    def _delta(self, block: _Block, event: ir.BlockDelta, out: list[bytes]) -> None:
        match (block.mode, event.kind):
            case ("refusal", "refusal"):
                self._refusal.append(event.text)
            case ("text", "text"):
                block.text.append(event.text)
                self._wire_delta(block, {"type": "text_delta", "text": event.text}, out)
            case ("tool", "arguments"):
                self._arguments(block, event.text, out)
            case ("pending", "redacted") | ("redacted", "redacted"):
                block.mode = "redacted"
                block.redacted.append(event.text)
            case ("pending", "reasoning" | "signature"):
                block.mode = "thinking"
                self._wire_start(block, {"type": "thinking", "thinking": "", "signature": ""}, out)
                self._delta(block, event, out)
            case ("thinking", "reasoning"):
                self._wire_delta(block, {"type": "thinking_delta", "thinking": event.text}, out)
            case ("thinking", "signature"):
                block.signature.append(event.text)  # sent whole before the stop: the SDK replaces, not appends
            case _:
                pass  # a delta this block cannot carry (server/dropped blocks, mismatched kinds)

    def _arguments(self, block: _Block, text: str, out: list[bytes]) -> None:
        """Anthropic's ``input`` is always an object and the SDKs parse every prefix of
        it: arguments that do not start with ``{`` (``null``, ``[]``, garbage from a
        non-Anthropic model) would make the client raise, so they are dropped on purpose
        and the tool gets ``input: {}``."""

        if not block.streaming_arguments:
            block.held_arguments.append(text)
            held = "".join(block.held_arguments).lstrip()
            if not held.startswith("{"):
                return
            block.streaming_arguments, block.held_arguments, text = True, [], held
        self._wire_delta(block, {"type": "input_json_delta", "partial_json": text}, out)

    def _close(self, out: list[bytes]) -> None:
        block, self._open = self._open, None
        if block is None:
            return
        match block.mode:
            case "thinking":
                self._wire_delta(block, {"type": "signature_delta", "signature": "".join(block.signature)}, out)
            case "redacted":
                self._wire_start(block, {"type": "redacted_thinking", "data": "".join(block.redacted)}, out)
            case "pending" | "dropped" | "refusal":
                return  # nothing was shown: an empty reasoning block or a foreign server item
        out.append(sse.encode("content_block_stop", {"type": "content_block_stop", "index": block.wire_index}))

    def _wire_start(self, block: _Block, content_block: dict[str, Any], out: list[bytes]) -> None:
        block.wire_index = self._next_index
        self._next_index += 1
        out.append(sse.encode("content_block_start", {
            "type": "content_block_start", "index": block.wire_index, "content_block": content_block,
        }))

    def _wire_delta(self, block: _Block, delta: dict[str, Any], out: list[bytes]) -> None:
        out.append(sse.encode("content_block_delta", {
            "type": "content_block_delta", "index": block.wire_index, "delta": delta,
        }))

