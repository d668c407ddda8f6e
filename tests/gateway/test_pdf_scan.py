"""Page counts and shown text read cheaply from PDFs written here."""

from __future__ import annotations

import base64
import zlib

from gateway.limits.pdf_scan import scan_pdf
from tests.tokenizer.samples import pdf


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def with_content(content: bytes, compressed: bool = True) -> bytes:
    """A one-page PDF whose page content stream is ``content``."""

    stream = zlib.compress(content) if compressed else content
    filt = b" /Filter /FlateDecode" if compressed else b""
    return (b"%%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n"
            b"2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Count 1 >>\nendobj\n"
            b"3 0 obj\n<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>\nendobj\n"
            b"4 0 obj\n<< /Length %d%s >>\nstream\n" % (len(stream), filt) + stream + b"\nendstream\nendobj\n%%EOF\n")


def test_counts_pages_and_reads_the_lines_they_show() -> None:
    facts = scan_pdf(b64(pdf([["First page, line one.", "Line two."], ["Second page."], []])))
    assert facts is not None
    assert facts.pages == 3
    assert facts.text.split() == ["First", "page,", "line", "one.", "Line", "two.", "Second", "page."]


def test_kerning_inside_a_word_joins_it_and_a_word_gap_spaces_it() -> None:
    facts = scan_pdf(b64(with_content(b"BT [(Ke)30(rned)-300(words)] TJ ET")))
    assert facts is not None and facts.text.split() == ["Kerned", "words"]


def test_escapes_in_literal_strings_are_decoded() -> None:
    facts = scan_pdf(b64(with_content(rb"BT (a \(b\) c\\d \101\102) Tj ET", compressed=False)))
    assert facts is not None and facts.text.strip() == r"a (b) c\d AB"


def test_hex_strings_count_as_two_byte_glyphs() -> None:
    facts = scan_pdf(b64(with_content(b"BT <00480065006C006C006F> Tj [<0057006F>-250<0072006C0064>] TJ ET")))
    assert facts is not None and facts.hex_glyphs == 10


def test_strings_outside_text_objects_are_not_read() -> None:
    facts = scan_pdf(b64(with_content(b"q 1 0 0 1 0 0 cm (not shown) Tj Q")))
    assert facts is not None and facts.text == ""


def test_data_that_is_no_pdf_gives_nothing() -> None:
    assert scan_pdf(b64(b"GIF89a...")) is None
    assert scan_pdf("@@@") is None
