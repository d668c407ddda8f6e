"""Chat Completions passthrough: the wire state needed to end a stream the upstream broke.

The first chunk is kept (as text, read only if an ending is needed) so that an
error chunk carries the stream's own ``id`` and ``created``; the ending mirrors
the translated one: a chunk with ``finish_reason: "error"`` and an ``error``
object, then ``data: [DONE]``.
"""

from __future__ import annotations

import re
import time

from .. import ids, ir, sse
from ..passthrough import ModelRewrite, Tap, json_object, object_of
from ..sse import SSEEvent
from .decode import ChatStreamDecoder
from .encode import chunk, error_object

# Some OpenAI-compatible servers label stream chunks as whole completions; the SDKs skip any chunk
# not labelled "chat.completion.chunk" (that is how they drop Azure's filter events), so such a
# stream would reach the client as nothing at all.
_WHOLE_COMPLETION = re.compile(r'("object"\s*:\s*)"chat\.completion"')


# What in a delta the decoder reads besides its text: a chunk with any of them is the decoder's.
_NOT_PLAIN = ("reasoning_content", "reasoning", "refusal", "annotations", "tool_calls")


class ChatTap(Tap):
    LIGHT = True

    def __init__(self, rewrite: ModelRewrite | None, client_model: str) -> None:
        super().__init__(ChatStreamDecoder(), rewrite)
        self._client_model = client_model
        self._first: str | None = None
        self._done = False

    def _light(self, event: SSEEvent) -> list[ir.Event] | None:
        """A chunk of text alone for the open text block: no usage, finish, error, tool call, reasoning,
        refusal, citation or logprobs (a byte check first: a chunk that finishes says so; a ``"usage": null``
        on every chunk, as OpenAI sends with ``include_usage``, does not make a chunk the decoder's)."""

        if self.lane is None or self.lane[1] != "text" or event.event not in (None, "message"):
            return None
        data = event.data
        if '"finish_reason":"' in data:
            return None
        chunk = json_object(data)
        if chunk is None or chunk.get("error") is not None or chunk.get("usage") is not None \
                or chunk.get("x_groq") is not None:
            return None
        choices = chunk.get("choices")
        if type(choices) is not list or len(choices) != 1 or type(choices[0]) is not dict:
            return None
        choice = choices[0]
        delta = choice.get("delta")
        if choice.get("index", 0) != 0 or choice.get("finish_reason") is not None \
                or choice.get("logprobs") is not None or type(delta) is not dict:
            return None
        text = delta.get("content")
        if type(text) is not str or any(delta.get(k) is not None for k in _NOT_PLAIN):
            return None
        return [ir.BlockDelta(self.lane[0], "text", text)] if text else []

    def _forward(self, event: SSEEvent) -> bytes:
        data = event.data
        if data.strip() == "[DONE]":
            self._done = True
            return sse.frame(event)
        if self._first is None:
            self._first = data
        rewritten = (_WHOLE_COMPLETION.sub(r'\1"chat.completion.chunk"', data, count=1)
                     if '"chat.completion"' in data else data)
        if self.rewrite is not None:
            rewritten = self.rewrite.in_text(rewritten)
        return sse.frame(event if rewritten == data else SSEEvent(rewritten, event.event, event.id))

    def _terminated(self) -> bool:
        return self._done

    def _terminator(self) -> bytes:
        self._done = True
        return sse.DONE

    def _error_ending(self, error: ir.Error) -> bytes:
        first = object_of(self._first)
        return chunk(first.get("id") or ids.new_id("chatcmpl-"), first.get("created") or int(time.time()),
                     self._client_model, {}, "error", error=error_object(error)) + self._terminator()
