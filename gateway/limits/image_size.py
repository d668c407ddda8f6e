"""An image's pixel size from the first bytes of its base64 data: PNG, JPEG, GIF, WebP.

Only as much of the base64 as the header needs is decoded: a PNG, GIF or WebP
says its size in the first 30 bytes; a JPEG says it in its first frame header
(SOF), which comes after any EXIF or ICC segments, so a JPEG is decoded in
growing prefixes until the SOF appears.
"""

from __future__ import annotations

import binascii
import struct
from typing import Literal

HEAD_CHARS = 64  # base64 characters that carry a PNG/GIF/WebP header (48 bytes)
JPEG_FIRST_CHARS = 16 * 1024

# JPEG start-of-frame markers (baseline, progressive, lossless, arithmetic...): C0–CF but not
# C4 (Huffman tables), C8 (reserved) or CC (arithmetic conditioning).
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def image_size(data_b64: str) -> tuple[int, int] | None:
    """(width, height), or None when the data is not an image this can read."""

    head = _decode_prefix(data_b64, HEAD_CHARS)
    if head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) >= 24:
        width, height = struct.unpack(">II", head[16:24])
        return width, height
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        width, height = struct.unpack("<HH", head[6:10])
        return width, height
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return _webp(head)
    if head[:2] == b"\xff\xd8":
        size = JPEG_FIRST_CHARS
        while True:
            found = _jpeg(_decode_prefix(data_b64, size))
            if found is not False:
                return found
            if size >= len(data_b64):
                return None
            size *= 4
    return None


def _decode_prefix(data_b64: str, chars: int) -> bytes:
    prefix = data_b64[:chars]
    prefix = prefix[: len(prefix) - len(prefix) % 4]
    try:
        return binascii.a2b_base64(prefix)
    except (binascii.Error, ValueError):
        return b""


def _webp(head: bytes) -> tuple[int, int] | None:
    chunk = head[12:16]
    if chunk == b"VP8 " and len(head) >= 30:  # lossy: 14-bit sizes after the frame tag
        width, height = struct.unpack("<HH", head[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(head) >= 25:  # lossless: 14 bits each, minus one, packed
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(head) >= 30:  # extended: 24-bit sizes, minus one
        return int.from_bytes(head[24:27], "little") + 1, int.from_bytes(head[27:30], "little") + 1
    return None


def _jpeg(data: bytes) -> tuple[int, int] | None | Literal[False]:
    """The size from the first SOF segment; False when ``data`` ends before it; None when not a JPEG."""

    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            i += 2
            continue
        length = struct.unpack(">H", data[i + 2:i + 4])[0]
        if marker in _SOF:
            if i + 9 > len(data):
                return False
            height, width = struct.unpack(">HH", data[i + 5:i + 9])
            return width, height
        i += 2 + length
    return False
