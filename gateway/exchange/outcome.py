"""What a stream's events say of how it ended, apart from any I/O: whether the upstream finished and
reported its usage, or the stream was cut before that (the client left, the upstream broke off), the
error it ended with, and the usage it is charged.

The stream writer (``gateway.exchange.streamwriter``) feeds it the IR events it reads, in order, and
tells it what happened outside them (the client left, the gateway failed); the log row is made of
what it says. A test feeds it events.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from accounts.outcomes import ErrorClass
from translation import ir
from translation.fold import Folder

from ..log.streamlog import SPELLED


class StreamOutcome:
    """A stream that ends before the upstream said what it used is still charged: the upstream
    generated what it sent. What never came is estimated: the input by the caller (from what was
    sent, ``gateway.limits.estimate``), the output from the deltas read (one token each, or a quarter
    of their characters if more)."""

    __slots__ = ("_folder", "delta_chars", "deltas", "error_class", "finished", "upstream_id")

    def __init__(self) -> None:
        self._folder = Folder()  # usage, finish and errors only: the text is not kept
        self.deltas = 0  # content deltas read from the upstream, and their characters
        self.delta_chars = 0
        self.finished = False  # the upstream said how the answer finished
        self.upstream_id: str | None = None  # the upstream's own response id, as its stream gave it
        self.error_class = ErrorClass.NONE

    def feed(self, events: Iterable[ir.Event], stopping: bool = False) -> None:
        """``stopping``: the gateway is stopping, so an error among ``events`` is its own (a drain)."""

        for event in events:
            if isinstance(event, ir.MessageStart):
                self.upstream_id = self.upstream_id or event.id
                if event.usage is not None:  # Anthropic's input, at the start: counted should the end not come
                    self._folder.feed(event)
            elif isinstance(event, ir.BlockDelta):
                if event.kind in SPELLED:
                    self.deltas += 1
                    self.delta_chars += len(event.text)
            elif isinstance(event, (ir.Usage, ir.Finish, ir.Error)):
                if isinstance(event, ir.Finish):
                    self.finished = True
                self._folder.feed(event)
                if isinstance(event, ir.Error):
                    self.error_class = (ErrorClass.SHUTTING_DOWN if stopping else
                                        ErrorClass.of_stream_error(event.error_type, event.transport))

    def client_left(self) -> None:
        self.error_class = self.error_class or ErrorClass.CLIENT_DISCONNECTED

    def gateway_failed(self) -> None:
        self.error_class = ErrorClass.INTERNAL

    @property
    def reported(self) -> bool:
        """The upstream has said how the answer finished and what it used."""

        return self.finished and self._folder.result().usage.output_tokens is not None

    @property
    def cut(self) -> bool:
        """The stream ended before the upstream reported: its usage is (partly) the gateway's estimate."""

        return not self.reported

    @property
    def finish(self) -> ir.Finish | None:
        return self._folder.result().finish

    def usage(self, input_estimate: Callable[[], int]) -> ir.Usage:
        """What the stream is charged: the upstream's usage, or on a cut stream what it reported so far
        (Anthropic's input, at the start) with the rest estimated."""

        usage = self._folder.result().usage
        if self.reported:
            return usage
        output = max(usage.output_tokens or 0, self.deltas, self.delta_chars // 4)
        return dataclasses.replace(usage, input_tokens=usage.input_tokens or input_estimate(), output_tokens=output)
