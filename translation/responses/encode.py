"""IR events → the client's Responses SSE, in the API's strictest shape.

Every event carries ``sequence_number`` (0, 1, 2, …); ``response.created`` and
``response.in_progress`` open with the full response object; each IR block becomes
one output item with its own increasing ``output_index``: a text block a message
(``content_part`` + ``output_text`` events, its citations as ``annotation.added`` and in the
part's ``annotations``, its token logprobs on the delta they describe and in the part), a
refusal block a message with a ``refusal`` part (``response.refusal.*`` events), a reasoning block a reasoning item (one
summary part; the signature as ``encrypted_content``), a tool call a function_call
item. The terminal event is written by ``finish()`` because usage may follow the
finish: ``response.completed``, ``response.incomplete`` (length, content filter) or
``response.failed``. An IR error ends the stream at once with ``response.failed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, assert_never

from .. import ir, sse
from ..encoder_base import EncoderBase
from ..ids import new_id
from ..protocol import EncodeContext
from . import content, items
from .envelope import echoed_fields, response_object
from .errors import response_error
from .response import RAW_PROTOCOL
from .stop_reason import incomplete_reason_for
from .usage import render_usage


@dataclass
class _Item:
    """The output item of the IR block being streamed."""

    block: int  # IR block index
    kind: ir.BlockKind
    output_index: int
    item_id: str
    pieces: list[str] = field(default_factory=list)  # text, reasoning summary or arguments so far
    signature: str | None = None
    summary_open: bool = False  # reasoning: summary part 0 announced
    call_id: str = ""
    name: str = ""
    raw: dict[str, Any] | None = None
    logprobs: list[ir.JSON] = field(default_factory=list)  # text: every token so far
    pending: list[ir.JSON] = field(default_factory=list)  # text: tokens of the next delta
    annotations: list[ir.JSON] = field(default_factory=list)  # text: as announced


class ResponsesStreamEncoder(EncoderBase):
    def __init__(self, ctx: EncodeContext) -> None:
        super().__init__()
        self._ctx = ctx
        self._id = ctx.id or new_id("resp_")
        self._fields = echoed_fields(ctx)
        self._seq = 0
        self._started = False
        self._open: _Item | None = None
        self._output: list[dict[str, Any]] = []  # finished items, in output_index order
        self._refusal_shown = False

    # ------------------------------------------------------------ entry points

    def _message_start(self, event: ir.MessageStart, out: list[bytes]) -> None:
        self._start(out)

    def _block_stop(self, event: ir.BlockStop, out: list[bytes]) -> None:
        if self._open is not None and self._open.block == event.index:
            self._close(out, "completed")

    def _end(self, finish: ir.Finish, out: list[bytes]) -> None:
        self._start(out)
        self._close(out, "completed")
        if finish.reason == ir.FinishReason.ERROR:
            self._failed(ir.Error(message="upstream finished with an error"), out)
            return
        reason = incomplete_reason_for(finish, self._refusal_shown)
        status = "incomplete" if reason else "completed"
        response = self._response(status, render_usage(self._usage), incomplete_reason=reason)
        self.final = response
        out.append(self._event(f"response.{status}", {"response": response}))

    def _error_ending(self, error: ir.Error, out: list[bytes]) -> None:
        self._start(out)
        self._close(out, "incomplete")
        self._failed(error, out)

    # ------------------------------------------------------------ framing

    def _event(self, etype: str, payload: dict[str, Any]) -> bytes:
        data = {"type": etype, "sequence_number": self._seq, **payload}
        self._seq += 1
        return sse.encode(etype, data)

    def _response(self, status: str, usage: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
        return response_object(self._ctx, self._id, status, list(self._output), usage,
                               fields=self._fields, **extra)

    def _start(self, out: list[bytes]) -> None:
        if self._started:
            return
        self._started = True
        response = self._response("in_progress", None)
        out.append(self._event("response.created", {"response": response}))
        out.append(self._event("response.in_progress", {"response": response}))

    def _failed(self, error: ir.Error, out: list[bytes]) -> None:
        response = self._response("failed", render_usage(self._usage), error=response_error(error))
        out.append(self._event("response.failed", {"response": response}))

    # ------------------------------------------------------------ items

    def _block_start(self, event: ir.BlockStart, out: list[bytes]) -> None:
        self._start(out)
        self._close(out, "completed")  # at most one block is open; be safe if not
        index = len(self._output)
        match event.kind:
            case "text" | "refusal":
                item = _Item(event.index, event.kind, index, items.message_id())
                added = content.message(item.item_id, [], "in_progress")
            case "reasoning":
                item = _Item(event.index, "reasoning", index, items.reasoning_id(event.id))
                added = items.reasoning(item.item_id, "", None)
            case "tool_call":
                item = _Item(event.index, "tool_call", index, items.function_call_id(),
                             call_id=items.call_id(event.id), name=event.name or "")
                added = items.function_call(item.item_id, item.call_id, item.name, "", "in_progress",
                                            self._ctx.body.get("tools"))
            case "server_tool":
                if event.raw_protocol != RAW_PROTOCOL or event.raw is None:
                    return  # another protocol's built-in tool: nothing a Responses client can show
                item = _Item(event.index, "server_tool", index, "", raw=event.raw)
                added = event.raw
            case _:
                assert_never(event.kind)
        self._open = item
        out.append(self._event("response.output_item.added", {"output_index": index, "item": added}))
        if item.kind in ("text", "refusal"):
            part = content.output_text("") if item.kind == "text" else content.refusal("")
            out.append(self._event("response.content_part.added", {
                **self._where(item), "content_index": 0, "part": part}))

    def _where(self, item: _Item) -> dict[str, Any]:
        return {"item_id": item.item_id, "output_index": item.output_index}

    def _block_delta(self, event: ir.BlockDelta, out: list[bytes]) -> None:
        item = self._open
        if item is None or item.block != event.index:
            return
        if event.data is not None and item.kind == "text":
            self._text_data(item, event.kind, event.data, out)
            return
        if not event.text:
            return
        match (item.kind, event.kind):
            case ("text", "text"):
                item.pieces.append(event.text)
                tokens, item.pending = item.pending, []
                item.logprobs.extend(tokens)
                out.append(self._event("response.output_text.delta", {
                    **self._where(item), "content_index": 0, "delta": event.text,
                    "logprobs": content.logprobs_to_wire(tokens)}))
            case ("refusal", "refusal"):
                item.pieces.append(event.text)
                self._refusal_shown = True
                out.append(self._event("response.refusal.delta", {
                    **self._where(item), "content_index": 0, "delta": event.text}))
            case ("reasoning", "reasoning"):
                if not item.summary_open:
                    item.summary_open = True
                    out.append(self._event("response.reasoning_summary_part.added", {
                        **self._where(item), "summary_index": 0, "part": items.summary_text("")}))
                item.pieces.append(event.text)
                out.append(self._event("response.reasoning_summary_text.delta", {
                    **self._where(item), "summary_index": 0, "delta": event.text}))
            case ("reasoning", "signature"):
                item.signature = (item.signature or "") + event.text
            case ("tool_call", "arguments"):
                item.pieces.append(event.text)
                out.append(self._event("response.function_call_arguments.delta", {
                    **self._where(item), "delta": event.text}))
            case _:
                pass  # redacted thinking, server tool input: no Responses field shows them

    def _text_data(self, item: _Item, kind: ir.DeltaKind, data: ir.JSON, out: list[bytes]) -> None:
        if kind == "logprobs":
            tokens = data.get("content")
            item.pending.extend(tokens if isinstance(tokens, list) else [])
        elif kind == "citation":
            note = content.citation_to_wire(data)
            if note is None:
                return  # a document location: no Responses annotation shows it
            out.append(self._event("response.output_text.annotation.added", {
                **self._where(item), "content_index": 0, "annotation_index": len(item.annotations),
                "annotation": note}))
            item.annotations.append(note)

    def _close(self, out: list[bytes], status: items.ItemStatus) -> None:
        item = self._open
        if item is None:
            return
        self._open = None
        text = "".join(item.pieces)
        match item.kind:
            case "text":
                if item.pending:  # tokens no text followed: a delta of their own, as on every other
                    item.logprobs.extend(item.pending)
                    out.append(self._event("response.output_text.delta", {
                        **self._where(item), "content_index": 0, "delta": "",
                        "logprobs": content.logprobs_to_wire(item.pending)}))
                    item.pending = []
                part = content.output_text(text, item.annotations, item.logprobs)
                done = content.message(item.item_id, [part], status)
                out.append(self._event("response.output_text.done", {
                    **self._where(item), "content_index": 0, "text": text,
                    "logprobs": content.logprobs_to_wire(item.logprobs)}))
                out.append(self._event("response.content_part.done", {
                    **self._where(item), "content_index": 0, "part": part}))
            case "refusal":
                part = content.refusal(text)
                done = content.message(item.item_id, [part], status)
                out.append(self._event("response.refusal.done", {
                    **self._where(item), "content_index": 0, "refusal": text}))
                out.append(self._event("response.content_part.done", {
                    **self._where(item), "content_index": 0, "part": part}))
            case "reasoning":
                done = items.reasoning(item.item_id, text, item.signature)
                if item.summary_open:
                    out.append(self._event("response.reasoning_summary_text.done", {
                        **self._where(item), "summary_index": 0, "text": text}))
                    out.append(self._event("response.reasoning_summary_part.done", {
                        **self._where(item), "summary_index": 0, "part": items.summary_text(text)}))
            case "tool_call":
                done = items.function_call(item.item_id, item.call_id, item.name, text, status,
                                           self._ctx.body.get("tools"))
                out.append(self._event("response.function_call_arguments.done", {
                    **self._where(item), "arguments": text}))
            case "server_tool":
                done = item.raw or {}
            case _:
                assert_never(item.kind)
        self._output.append(done)
        out.append(self._event("response.output_item.done", {"output_index": item.output_index, "item": done}))
