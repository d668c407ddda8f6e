"""Server-sent events: an incremental parser and a pure encoder.

The parser does no I/O: feed it bytes as they arrive, in any chunking, and it
returns the events completed so far (WHATWG event-stream rules: LF, CRLF or CR
line ends, multi-line ``data:``, comments, optional ``event:``). Given a bound,
it refuses a line or an event's data past it (:class:`EventTooLarge`) instead of
holding it: an upstream that sends 200 MB without a newline must not cost 200 MB.
The encoder is the one place that frames an event for the wire.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class SSEEvent:
    data: str
    event: str | None = None
    id: str | None = None


class EventTooLarge(ValueError):
    """A line or an event's data past the parser's bound."""


class SSEParser:
    """``feed(bytes) -> events`` then ``finish() -> events`` at end of stream.

    ``max_event_bytes``: the longest line and the most data an event may hold (None: no bound).
    """

    def __init__(self, max_event_bytes: int | None = None) -> None:
        self._limit = max_event_bytes
        self._pieces: list[bytes] = []  # an unfinished line, kept in pieces to stay linear
        self._held = 0  # bytes in _pieces
        self._data_size = 0  # characters in _data
        self._pending_cr = False
        self._event: str | None = None
        self._data: list[str] = []
        self._id: str | None = None
        self.comments = 0

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if not chunk:
            return []
        if chunk[-2:] == b"\n\n" and not (self._pieces or self._pending_cr or self._data or self._event):
            whole = self._whole_events(chunk)
            if whole is not None:
                return whole
        if self._pending_cr:
            self._pending_cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            # A CR closing the chunk may be the first half of a CRLF split across reads.
            self._pending_cr = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" not in chunk:
            self._hold(chunk)
            self._pieces.append(chunk)
            return []
        lines = chunk.split(b"\n")
        if self._pieces:
            self._hold(lines[0])
            self._pieces.append(lines[0])
            lines[0] = b"".join(self._pieces)
        rest = lines.pop()
        self._pieces = [rest] if rest else []
        self._held = 0
        self._hold(rest)
        out: list[SSEEvent] = []
        for line in lines:
            # The two lines of nearly every event, read without the general path's decode of the field name.
            if not line:
                self._dispatch(out)
            elif line.startswith(b"data:"):
                self._data_line((line[6:] if line[5:6] == b" " else line[5:]).decode("utf-8", "replace"))
            else:
                self._line(line, out)
        return out

    def _whole_events(self, chunk: bytes) -> list[SSEEvent] | None:
        """A chunk of whole events as upstreams write them (an ``event:`` line or none, one ``data:``
        line, a blank line; LF only), read without the line-by-line path; None for anything else
        (comments, ids, several data lines, CRs, an event past the bound), which that path reads."""

        if b"\r" in chunk or (self._limit is not None and len(chunk) > self._limit):
            return None
        out: list[SSEEvent] = []
        for block in chunk[:-2].split(b"\n\n"):
            name: str | None = None
            head, newline, data = block.partition(b"\n")
            if newline:
                if not head.startswith(b"event:") or b"\n" in data:
                    return None
                name = (head[7:] if head[6:7] == b" " else head[6:]).decode("utf-8", "replace") or None
            else:
                data = head
            if not data.startswith(b"data:"):
                return None
            value = data[6:] if data[5:6] == b" " else data[5:]
            out.append(SSEEvent(data=value.decode("utf-8", "replace"), event=name, id=self._id))
        return out

    def finish(self) -> list[SSEEvent]:
        """End of stream: a last event without its blank line is still delivered,
        so that a truncated upstream surfaces as malformed data, not as silence."""

        out: list[SSEEvent] = []
        if self._pieces:
            line = b"".join(self._pieces)
            self._pieces = []
            self._held = 0
            self._line(line, out)
        self._dispatch(out)
        return out

    def _line(self, raw: bytes, out: list[SSEEvent]) -> None:
        if not raw:
            self._dispatch(out)
            return
        line = raw.decode("utf-8", "replace")
        if line[0] == ":":
            self.comments += 1
            return
        name, sep, value = line.partition(":")
        if sep and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data_line(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        # "retry" and unknown fields are ignored, as the spec says.

    def _data_line(self, value: str) -> None:
        self._data.append(value)
        if self._limit is not None:
            self._data_size += len(value)
            if self._data_size > self._limit:
                raise EventTooLarge(f"an event's data exceeds {self._limit} bytes")

    def _dispatch(self, out: list[SSEEvent]) -> None:
        if self._data:
            data = self._data[0] if len(self._data) == 1 else "\n".join(self._data)
            out.append(SSEEvent(data=data, event=self._event or None, id=self._id))
        self._data = []
        self._data_size = 0
        self._event = None

    def _hold(self, piece: bytes) -> None:
        if self._limit is not None:
            self._held += len(piece)
            if self._held > self._limit:
                raise EventTooLarge(f"a line exceeds {self._limit} bytes")


def encode(event: str | None, data: Any) -> bytes:
    """One event as bytes: JSON on a single line, blank-line terminated."""

    payload = orjson.dumps(data)
    if event is None:
        return b"data: " + payload + b"\n\n"
    return b"event: " + event.encode() + b"\ndata: " + payload + b"\n\n"


def encode_text(data: str, event: str | None = None) -> bytes:
    """A non-JSON payload such as ``[DONE]``; multi-line text becomes several data lines."""

    body = b"".join(b"data: " + line.encode() + b"\n" for line in data.split("\n"))
    head = b"" if event is None else b"event: " + event.encode() + b"\n"
    return head + body + b"\n"


def frame(event: SSEEvent) -> bytes:
    """An event parsed by :class:`SSEParser` put back on the wire: same name, id and data
    (multi-line data as several lines), LF line ends, comments and padding after ``data:`` gone."""

    head = b"" if event.event is None else b"event: " + event.event.encode() + b"\n"
    if event.id is not None:
        head += b"id: " + event.id.encode() + b"\n"
    if "\n" not in event.data:
        return head + b"data: " + event.data.encode() + b"\n\n"
    return head + b"".join(b"data: " + line.encode() + b"\n" for line in event.data.split("\n")) + b"\n"


def comment(text: str = "keepalive") -> bytes:
    return b": " + text.encode() + b"\n\n"


DONE = encode_text("[DONE]")


def loads(data: str | bytes) -> Any:
    return orjson.loads(data)


def dumps(obj: Any) -> str:
    return orjson.dumps(obj).decode()
