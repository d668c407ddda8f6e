"""The lifecycle every client stream encoder shares.

An encoder holds the finish reason until :meth:`finish` (usage may come after
it), merges every usage report, ends at once on an :class:`ir.Error`, and writes
nothing after its ending. ``finish()`` without a Finish is a truncated upstream
and gets the protocol's error ending. Subclasses only say what each event looks
like on their wire.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, assert_never

from . import ir

NO_FINISH = "upstream ended without a finish reason"


class EncoderBase(ABC):
    def __init__(self) -> None:
        self._done = False
        self._usage = ir.Usage()
        self._finish: ir.Finish | None = None
        self.final: dict[str, Any] | None = None  # see streams.StreamEncoder

    def feed(self, event: ir.Event) -> list[bytes]:
        if self._done:
            return []
        out: list[bytes] = []
        match event:
            case ir.MessageStart():
                if event.usage is not None:
                    self._usage = self._usage.merge(event.usage)
                self._message_start(event, out)
            case ir.BlockStart():
                self._block_start(event, out)
            case ir.BlockDelta():
                self._block_delta(event, out)
            case ir.BlockStop():
                self._block_stop(event, out)
            case ir.Usage():
                self._usage = self._usage.merge(event)
            case ir.Finish():
                self._finish = event
            case ir.Error():
                self._end_with_error(event, out)
            case _:
                assert_never(event)
        return out

    def finish(self) -> list[bytes]:
        if self._done:
            return []
        out: list[bytes] = []
        if self._finish is None:
            self._end_with_error(ir.transport_error(ir.TransportFailure.TRUNCATED, NO_FINISH), out)
        else:
            self._end(self._finish, out)
            self._done = True
        return out

    def _end_with_error(self, error: ir.Error, out: list[bytes]) -> None:
        self._error_ending(error, out)
        self._done = True

    @abstractmethod
    def _message_start(self, event: ir.MessageStart, out: list[bytes]) -> None: ...

    @abstractmethod
    def _block_start(self, event: ir.BlockStart, out: list[bytes]) -> None: ...

    @abstractmethod
    def _block_delta(self, event: ir.BlockDelta, out: list[bytes]) -> None: ...

    @abstractmethod
    def _block_stop(self, event: ir.BlockStop, out: list[bytes]) -> None: ...

    @abstractmethod
    def _end(self, finish: ir.Finish, out: list[bytes]) -> None:
        """Close what is open and write the terminal events of a finished response."""

    @abstractmethod
    def _error_ending(self, error: ir.Error, out: list[bytes]) -> None:
        """Close what is open and write the protocol's error ending and terminator."""
