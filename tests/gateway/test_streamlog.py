"""A streamed answer's log body: the events as sent, unless their text spells out a secret."""

from __future__ import annotations

import random
import string

from gateway.log.streamlog import NOTE, SpelledText, kept_stream
from gateway.log.writer import LogWriter
from translation import ir

KEY = "sk-" + "proj-" + "".join(random.Random(5).choices(string.ascii_letters + string.digits, k=40))


def spelled(*deltas: tuple[int, str, str]) -> SpelledText:
    text = SpelledText(cap=10_000)
    for index, kind, piece in deltas:
        text.feed(ir.BlockDelta(index, kind, piece))  # type: ignore[arg-type]
    return text


def test_a_stream_without_secrets_is_kept_as_sent() -> None:
    transcript = 'data: {"delta": "Hello"}\n\ndata: {"delta": " world"}\n\n'
    assert kept_stream(LogWriter(body_limit=1000), transcript, spelled((0, "text", "Hello"), (0, "text", " world"))) \
        == transcript


def test_a_secret_cut_across_events_keeps_the_text_redacted_instead_of_the_events() -> None:
    cuts = [KEY[:6], KEY[6:20], KEY[20:]]
    transcript = "".join(f'data: {{"delta": "{piece}"}}\n\n' for piece in cuts)
    text = spelled((0, "text", "your key: "), *((0, "text", piece) for piece in cuts), (1, "arguments", '{"a": 1}'))
    kept = kept_stream(LogWriter(body_limit=1000), transcript, text)
    assert kept == NOTE + 'your key: [redacted]\n{"a": 1}'
    assert not any(piece in kept for piece in cuts)


def test_signatures_are_not_text_and_the_text_is_bounded() -> None:
    assert spelled((0, "signature", KEY), (0, "text", "ok")).text() == "ok"
    small = SpelledText(cap=5)
    for piece in ("abcdef", "ghi"):
        small.feed(ir.BlockDelta(0, "text", piece))
    assert small.text() == "abcdef"  # what arrives past the cap is not kept
