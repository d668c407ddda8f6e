"""What the request log keeps of a streamed answer, with body logging on.

The stream's bytes as sent are kept, redacted like any body. But a model spells a
secret out in pieces (``"sk-pro"``, ``"j-3Fa"``, …), each event holding one, so no
piece looks like a key and the transcript would keep them all. So the stream
writer also hands over the text its events spelled, block by block; when that
text holds a secret the transcript is not kept, the text is (redacted), under a
note that says why. The check costs one redaction of at most twice the body cap
per stream, and only with body logging on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accounts.redact import redact
from translation import ir

if TYPE_CHECKING:
    from .writer import LogWriter

# The deltas that carry what the model wrote (not signatures, citations or logprobs).
SPELLED = frozenset({"text", "reasoning", "arguments", "refusal"})
NOTE = "[the stream spelled out a secret across its events: its text is kept instead of its events]\n"


class SpelledText:
    """The text of a stream's deltas, block by block, up to ``cap`` characters."""

    __slots__ = ("blocks", "size", "cap")

    def __init__(self, cap: int) -> None:
        self.blocks: dict[int, list[str]] = {}
        self.size = 0
        self.cap = cap

    def feed(self, event: ir.BlockDelta) -> None:
        if event.kind in SPELLED and self.size < self.cap:
            self.blocks.setdefault(event.index, []).append(event.text)
            self.size += len(event.text)

    def text(self) -> str:
        return "\n".join("".join(parts) for parts in self.blocks.values())


def kept_stream(writer: LogWriter, transcript: str, spelled: SpelledText) -> str:
    text = spelled.text()
    known = writer.known_secrets
    if redact(text, known.current if known is not None else (), limit=len(text)) == text:
        return writer.keep_body(transcript)
    return NOTE + writer.keep_body(text)
