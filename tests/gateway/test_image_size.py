"""Image sizes read from the headers of base64 data, each format laid out by its specification."""

from __future__ import annotations

import base64
import struct

import pytest

from gateway.limits.image_size import image_size


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def png(width: int, height: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\0\0\0\0" + b"\0" * 200


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\xf7\0\0" + b"\0" * 100


def riff(chunk: bytes, payload: bytes) -> bytes:
    body = b"WEBP" + chunk + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", len(body)) + body


def webp_lossy(width: int, height: int) -> bytes:
    # Frame tag (3 bytes), start code 9d 01 2a, then 14-bit width and height (2 scale bits above).
    return riff(b"VP8 ", b"\x30\x01\x00\x9d\x01\x2a" + struct.pack("<HH", width, height) + b"\0" * 50)


def webp_lossless(width: int, height: int) -> bytes:
    bits = (width - 1) | ((height - 1) << 14)
    return riff(b"VP8L", b"\x2f" + bits.to_bytes(4, "little") + b"\0" * 50)


def webp_extended(width: int, height: int) -> bytes:
    return riff(b"VP8X", b"\x10\0\0\0" + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little"))


def jpeg(width: int, height: int, exif_bytes: int = 0, marker: int = 0xC0) -> bytes:
    segments = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0"
    if exif_bytes:  # an APP1 segment (EXIF, thumbnails) before the frame header, as cameras write
        segments += b"\xff\xe1" + struct.pack(">H", exif_bytes + 2) + b"\x5a" * exif_bytes
    sof = b"\xff" + bytes([marker]) + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\0" * 3
    return b"\xff\xd8" + segments + b"\xff\xdb" + struct.pack(">H", 67) + b"\0" * 65 + sof + b"\0" * 100


@pytest.mark.parametrize("make", [png, gif, webp_lossy, webp_lossless, webp_extended, jpeg],
                         ids=["png", "gif", "webp-lossy", "webp-lossless", "webp-extended", "jpeg"])
def test_reads_the_pixel_size_of_each_format(make: object) -> None:
    assert callable(make)
    assert image_size(b64(make(1234, 567))) == (1234, 567)


def test_reads_a_progressive_jpeg_whose_frame_header_follows_60_kb_of_exif() -> None:
    assert image_size(b64(jpeg(4032, 3024, exif_bytes=60_000, marker=0xC2))) == (4032, 3024)


@pytest.mark.parametrize("data", [b64(b"not an image at all, just some text"), "!!not base64!!", "",
                                  b64(b"\xff\xd8\xff\xe0\x00\x10JFIF")])
def test_data_that_is_no_readable_image_has_no_size(data: str) -> None:
    assert image_size(data) is None
