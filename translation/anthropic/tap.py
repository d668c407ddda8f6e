"""Messages passthrough: the wire state needed to end a stream the upstream broke.

Open blocks are tracked by the upstream's own indexes (only block start/stop
events are read for it); the ending mirrors the translated one: each open block
stopped, an ``error`` event, ``message_stop``.
"""

from __future__ import annotations

from .. import ids, ir, sse
from ..passthrough import ModelRewrite, Tap, event_type, json_object, object_of
from ..sse import SSEEvent
from .decode import _DELTA_KINDS, AnthropicStreamDecoder
from .encode import MESSAGE_STOP, error_event, message_start

# The deltas read light (``Tap._light``), as the decoder reads them: all but a tool call's arguments,
# whose arrival the decoder notes (a tool_use that carried its input whole at the start).
_LIGHT = {kind: read for kind, read in _DELTA_KINDS.items() if read[1] != "arguments"}


class AnthropicTap(Tap):
    LIGHT = True

    def __init__(self, rewrite: ModelRewrite | None, client_model: str) -> None:
        super().__init__(AnthropicStreamDecoder(), rewrite)
        self._client_model = client_model
        self._started = False
        self._stopped = False
        self._open: set[int] = set()
        self._wire: int | None = None  # the upstream's index of the block last started

    def _light(self, event: SSEEvent) -> list[ir.Event] | None:
        if event.event != "content_block_delta" or self.lane is None:
            return None
        payload = json_object(event.data)
        if payload is None or payload.get("type") != "content_block_delta" or payload.get("index") != self._wire:
            return None
        delta = payload.get("delta")
        read = _LIGHT.get(delta.get("type")) if type(delta) is dict else None  # type: ignore[arg-type]
        if read is None:
            return None
        field, kind, block_kind = read
        text = delta.get(field)  # type: ignore[union-attr]
        index, open_kind = self.lane
        if open_kind != block_kind or type(text) is not str or type(payload["index"]) is not int:
            return None
        return [ir.BlockDelta(index=index, kind=kind, text=text)] if text else []

    def _forward(self, event: SSEEvent) -> bytes:
        name = event_type(event)
        data = event.data
        match name:
            case "content_block_start" | "content_block_stop":
                index = _index(data)
                if index is not None:
                    if name == "content_block_start":
                        self._open.add(index)
                        self._wire = index
                    else:
                        self._open.discard(index)
            case "message_start":
                self._started = True
                self._open.clear()
                if self.rewrite is not None:
                    data = self.rewrite.in_text(data)
                    return sse.frame(SSEEvent(data, event.event, event.id))
            case "message_stop":
                self._stopped = True
        return sse.frame(event)

    def _terminated(self) -> bool:
        return self._stopped

    def _terminator(self) -> bytes:
        self._stopped = True
        return MESSAGE_STOP

    def _error_ending(self, error: ir.Error) -> bytes:
        out: list[bytes] = []
        if not self._started:
            out.append(message_start(ids.new_id("msg_"), self._client_model, {"input_tokens": 0, "output_tokens": 0}))
        for index in sorted(self._open):
            out.append(sse.encode("content_block_stop", {"type": "content_block_stop", "index": index}))
        self._open.clear()
        out.append(error_event(error))
        out.append(self._terminator())
        return b"".join(out)



def _index(data: str) -> int | None:
    index = object_of(data).get("index")
    return index if isinstance(index, int) else None
