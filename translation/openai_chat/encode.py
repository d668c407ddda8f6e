"""IR events → client Chat Completions SSE.

Every chunk carries the same ``id``/``created``/``model``; the first one announces
the assistant role. The finish reason and usage go out together in one last chunk
written by :meth:`ChatStreamEncoder.finish` (usage may arrive after the Finish),
then ``data: [DONE]``.

A refusal block streams as ``delta.refusal`` (never ``content``). Token logprobs ride on the
chunk of the text they describe (``choices[0].logprobs.content`` / ``.refusal``). Citations
are held and sent together in one ``delta.annotations`` chunk before the last one, indexed
into the whole ``content``: the SDK's accumulator cannot merge two ``annotations`` deltas, and
that is where search models send them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .. import ids, ir, sse
from ..encoder_base import EncoderBase
from ..protocol import EncodeContext
from . import stop_reason, url_citations
from .usage import is_empty, render_usage

NAME = "openai_chat"

# Which IR delta kind a block of each kind accepts, and the delta field it becomes.
_DELTA_FIELD: dict[tuple[ir.BlockKind, ir.DeltaKind], str] = {
    ("text", "text"): "content",
    ("reasoning", "reasoning"): "reasoning_content",
    ("refusal", "refusal"): "refusal",
}
# The ``choices[0].logprobs`` key for the tokens of each block kind.
_LOGPROBS_FIELD: dict[ir.BlockKind, str] = {"text": "content", "refusal": "refusal"}


@dataclass
class _Block:
    kind: ir.BlockKind | Literal["dropped"]
    tool_position: int = 0  # the Chat tool_calls index of a tool_call block
    offset: int = 0  # text: where the block starts in the whole content
    logprobs: list[ir.JSON] = field(default_factory=list)  # waiting for the text they describe


class ChatStreamEncoder(EncoderBase):
    def __init__(self, ctx: EncodeContext) -> None:
        super().__init__()
        self._id = ctx.id or ids.new_id("chatcmpl-")
        self._created = ctx.created
        self._model = ctx.model
        self._started = False
        self._blocks: dict[int, _Block] = {}  # open IR blocks
        self._tool_count = 0
        self._content_len = 0
        self._annotations: list[ir.JSON] = []
        self._refusal_shown = False

    def _message_start(self, event: ir.MessageStart, out: list[bytes]) -> None:
        self._start(out)

    def _block_stop(self, event: ir.BlockStop, out: list[bytes]) -> None:
        block = self._blocks.pop(event.index, None)
        if block is not None and block.logprobs:  # logprobs no text followed
            out.append(self._chunk({}, logprobs=self._logprobs(block)))

    def _end(self, finish: ir.Finish, out: list[bytes]) -> None:
        self._start(out)
        for index in list(self._blocks):
            self._block_stop(ir.BlockStop(index), out)
        if self._annotations:
            out.append(self._chunk({"annotations": self._annotations}))
        extra: dict[str, Any] = {}
        if not is_empty(self._usage):
            extra["usage"] = render_usage(self._usage)
        out.append(self._chunk({}, stop_reason.to_chat(finish, self._refusal_shown), **extra))
        out.append(sse.DONE)

    # ------------------------------------------------------------ pieces

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None,
               logprobs: dict[str, Any] | None = None, **extra: Any) -> bytes:
        return chunk(self._id, self._created, self._model, delta, finish_reason, logprobs, **extra)

    def _start(self, out: list[bytes]) -> None:
        if not self._started:
            self._started = True
            out.append(self._chunk({"role": "assistant", "content": ""}))

    def _block_start(self, event: ir.BlockStart, out: list[bytes]) -> None:
        self._start(out)
        if event.kind == "tool_call":
            position = self._tool_count
            self._tool_count += 1
            self._blocks[event.index] = _Block("tool_call", position)
            call = {"index": position, "id": event.id or ids.new_id("call_"), "type": "function",
                    "function": {"name": event.name or "", "arguments": ""}}
            out.append(self._chunk({"tool_calls": [call]}))
        elif event.kind == "server_tool":
            # Chat has no server tools of its own: only a Chat-born raw block is re-emitted.
            if event.raw_protocol == NAME and event.raw is not None:
                out.append(self._chunk(dict(event.raw)))
            self._blocks[event.index] = _Block("dropped")
        else:
            self._blocks[event.index] = _Block(event.kind, offset=self._content_len)

    def _block_delta(self, event: ir.BlockDelta, out: list[bytes]) -> None:
        self._start(out)
        block = self._blocks.get(event.index)
        if block is None or block.kind == "dropped":
            return
        if event.kind == "logprobs" and event.data is not None and block.kind in _LOGPROBS_FIELD:
            content = event.data.get("content")
            block.logprobs.extend(content if isinstance(content, list) else [])
            return
        if event.kind == "citation" and event.data is not None and block.kind == "text":
            wire = url_citations.to_wire(event.data, block.offset)
            if wire is not None:  # document locations have no Chat shape
                self._annotations.append(wire)
            return
        if not event.text:
            return
        if block.kind == "tool_call":
            if event.kind == "arguments":
                fragment = {"index": block.tool_position, "function": {"arguments": event.text}}
                out.append(self._chunk({"tool_calls": [fragment]}))
            return
        field_name = _DELTA_FIELD.get((block.kind, event.kind))
        if field_name is None:  # signature and redacted deltas have no Chat slot
            return
        if block.kind == "text":
            self._content_len += len(event.text)
        elif block.kind == "refusal":
            self._refusal_shown = True
        out.append(self._chunk({field_name: event.text}, logprobs=self._logprobs(block)))

    def _logprobs(self, block: _Block) -> dict[str, Any] | None:
        """``choices[0].logprobs`` for the tokens ``block`` holds, which are handed over."""

        if not block.logprobs or block.kind not in _LOGPROBS_FIELD:
            return None
        tokens, block.logprobs = block.logprobs, []
        body: dict[str, Any] = {"content": None, "refusal": None}
        body[_LOGPROBS_FIELD[block.kind]] = tokens
        return body

    def _error_ending(self, error: ir.Error, out: list[bytes]) -> None:
        self._start(out)
        out.append(self._chunk({}, "error", error=error_object(error)))
        out.append(sse.DONE)


def chunk(chunk_id: str, created: int, model: str, delta: dict[str, Any], finish_reason: str | None = None,
          logprobs: dict[str, Any] | None = None, **extra: Any) -> bytes:
    """One ``chat.completion.chunk`` for choice 0, framed."""

    body: dict[str, Any] = {
        "id": chunk_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}],
    }
    body.update(extra)
    return sse.encode(None, body)


def error_object(error: ir.Error) -> dict[str, Any]:
    """The ``error`` of the chunk that ends a failed stream (``finish_reason: "error"``)."""

    return {"message": error.message, "type": error.error_type, "param": error.param, "code": error.code}
