"""Responses passthrough: the wire state needed to end a stream the upstream broke.

The ``response`` object of the lifecycle events is kept (those few events are
read whole; deltas are not), and the last event's text, so that the ending is a
``response.failed`` for the upstream's own response id with the next
``sequence_number`` — what the SDKs expect after an ``error`` event too.
"""

from __future__ import annotations

import time
from typing import Any

from .. import ids, ir, sse
from ..passthrough import ModelRewrite, Tap, event_type, json_object, object_of
from ..sse import SSEEvent
from .decode import ResponsesStreamDecoder
from .errors import response_error
from .partial import PartialOutput

_LIFECYCLE = frozenset({"response.created", "response.in_progress", "response.queued", "response.completed",
                        "response.incomplete", "response.failed"})
_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_ANSWERED = frozenset({"response.completed", "response.incomplete"})
# The deltas read light (``Tap._light``): nearly all of a stream's events. The decoder says whether
# one is plain, for the block it has open (``ResponsesStreamDecoder.delta``).
_DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta",
                     "response.reasoning_summary_text.delta", "response.function_call_arguments.delta"})


class ResponsesTap(Tap):
    LIGHT = True

    def __init__(self, rewrite: ModelRewrite | None, client_model: str) -> None:
        self._decoder = ResponsesStreamDecoder()
        super().__init__(self._decoder, rewrite)
        self._client_model = client_model
        self._response: dict[str, Any] | None = None
        self._last: str | None = None
        self._terminal = False
        self._output = PartialOutput()

    def _light(self, event: SSEEvent) -> list[ir.Event] | None:
        """A delta by its name, then its data parsed once and handed to the decoder as an object."""

        name = event_type(event)
        if name not in _DELTAS:
            return None
        data = json_object(event.data)
        if data is None or data.get("type") != name:
            return None
        return self._decoder.delta(name, data)

    def _forward_light(self, event: SSEEvent) -> bytes:
        self._last = event.data
        self._output.delta(event.data)
        return sse.frame(event)

    def _forward(self, event: SSEEvent) -> bytes:
        self._last = event.data
        name = event_type(event)
        if name not in _LIFECYCLE:
            self._output.item_event(name or "", event.data)
            return sse.frame(event)
        self._terminal = self._terminal or name in _TERMINAL
        read = self._decoder.last_read
        obj = read[1] if read is not None and read[0] is event else object_of(event.data)
        response = obj.get("response")
        if not isinstance(response, dict):
            return sse.frame(event)
        self._response = response
        rewritten = self.rewrite is not None and self.rewrite.in_object(response)
        if name in _ANSWERED:
            self.final = response
        if not rewritten:
            return sse.frame(event)
        return sse.frame(SSEEvent(sse.dumps(obj), event.event, event.id))

    def _terminated(self) -> bool:
        return self._terminal

    def _terminator(self) -> bytes:
        # Finished without its terminal event, or an `error` event with nothing after it.
        return self._error_ending(self.reported_error or ir.transport_error(
            ir.TransportFailure.TRUNCATED, "upstream stream ended before completion"))

    def _error_ending(self, error: ir.Error) -> bytes:
        self._terminal = True
        out = b""
        last = object_of(self._last).get("sequence_number")
        seq = last + 1 if isinstance(last, int) else 0
        if self._response is None:
            # Nothing came before: the SDKs want the response created before it can fail.
            self._response = {"id": ids.new_id("resp_"), "object": "response", "created_at": int(time.time()),
                              "status": "in_progress", "model": self._client_model, "output": [], "tools": [],
                              "tool_choice": "auto", "parallel_tool_calls": True}
            out = sse.encode("response.created", {"type": "response.created", "sequence_number": seq,
                                                  "response": self._response})
            seq += 1
        response = {**self._response, "status": "failed", "error": response_error(error),
                     "output": self._output.output()}
        return out + sse.encode("response.failed", {"type": "response.failed", "sequence_number": seq,
                                                     "response": response})

