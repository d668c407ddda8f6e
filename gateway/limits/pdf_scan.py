"""What a PDF costs a model, found cheaply: its page count and the text its pages show.

Claude reads a PDF as one image per page plus the text extracted from it
(Anthropic's PDF support docs), so a count needs both. No layout, fonts or
encodings are interpreted: the content streams are inflated (zlib, FlateDecode)
and the strings of the text-showing operators (``Tj``, ``TJ``, ``'``, ``"``)
between ``BT`` and ``ET`` are read. Literal strings are decoded as Latin-1 (what
simple fonts mostly are); hex strings, which CID fonts use with glyph ids that
need the font's ToUnicode map to decode, are counted as glyphs instead.
"""

from __future__ import annotations

import binascii
import re
import zlib
from dataclasses import dataclass

# Inflating stops here: a count must not cost a zip bomb's worth of memory.
MAX_INFLATED = 32 * 1024 * 1024
# In a TJ array a shift this far left (thousandths of a text unit) is a word space, not kerning.
WORD_GAP = 200

_STREAM = re.compile(rb"(?<!end)stream\r?\n")
_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z])")
_TEXT_OBJECT = re.compile(rb"\bBT\b(.*?)\bET\b", re.S)
# A literal string (one level of unescaped parentheses inside), a hex string, a TJ array's bracket or number.
_SHOWN = re.compile(rb"\((?:\\.|[^\\()]|\((?:\\.|[^\\()])*\))*\)|<[0-9A-Fa-f\s]*>|\[|\]|-?\d*\.?\d+", re.S)
_ESCAPE = re.compile(rb"\\([0-7]{1,3}|.)", re.S)
_ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f"}


@dataclass
class PdfFacts:
    pages: int
    text: str  # the text shown in literal strings, words spaced
    hex_glyphs: int  # glyphs shown in hex strings (not decodable without the fonts)


def scan_pdf(data_b64: str) -> PdfFacts | None:
    """The facts of a base64 PDF, or None when it is not one."""

    try:
        data = binascii.a2b_base64(data_b64)
    except (binascii.Error, ValueError):
        return None
    if not data.startswith(b"%PDF"):
        return None
    parts = [data]
    budget = MAX_INFLATED
    for m in _STREAM.finditer(data):
        end = data.find(b"endstream", m.end())
        if end < 0 or budget <= 0:
            break
        head = data[max(0, m.start() - 512):m.start()]
        head = head[head.rfind(b"obj") + 1:]
        if b"/Image" in head or b"/FontFile" in head or b"/Length1" in head:
            continue  # pictures and embedded fonts show no text
        if b"/FlateDecode" in head:
            try:
                inflated = zlib.decompressobj().decompress(data[m.end():end], budget)
            except zlib.error:
                continue
        elif b"/Filter" in head:
            continue  # another filter (LZW, DCT...): nothing cheap to read
        else:
            inflated = data[m.end():end]
        budget -= len(inflated)
        parts.append(inflated)
    pages = sum(len(_PAGE.findall(p)) for p in parts)
    words: list[str] = []
    glyphs = 0
    for part in parts[1:]:
        if b"BT" in part:
            glyphs += _shown_text(part, words)
    return PdfFacts(pages=max(pages, 1), text="".join(words), hex_glyphs=glyphs)


def _shown_text(content: bytes, out: list[str]) -> int:
    """Append the literal text shown in ``content`` to ``out``; return the count of hex glyphs."""

    glyphs = 0
    for block in _TEXT_OBJECT.finditer(content):
        before = len(out)
        in_array = False
        for token in _SHOWN.findall(block.group(1)):
            first = token[:1]
            if first == b"(":
                text = _literal(token[1:-1]).decode("latin-1")
                out.append(text if in_array else text + " ")  # separate Tj strings are separate runs
            elif first == b"<":
                digits = len(token) - 2 - sum(token.count(c) for c in (b" ", b"\n", b"\r", b"\t"))
                # CID fonts (the usual reason for hex) take two bytes a glyph.
                glyphs += digits // 4 if digits % 4 == 0 else digits // 2
            elif first == b"[":
                in_array = True
            elif first == b"]":
                in_array = False
                out.append(" ")
            elif in_array and float(token) <= -WORD_GAP:
                out.append(" ")
        if len(out) > before:
            out.append("\n")
    return glyphs


def _literal(raw: bytes) -> bytes:
    if b"\\" not in raw:
        return raw
    return _ESCAPE.sub(_unescape, raw)


def _unescape(m: re.Match[bytes]) -> bytes:
    esc = m.group(1)
    if esc[:1].isdigit():
        return bytes([int(esc, 8) & 0xFF])
    if esc in (b"\n", b"\r"):
        return b""  # a line continuation
    return _ESCAPES.get(esc, esc)
