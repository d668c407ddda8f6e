"""Documents (PDF or plain text) between the three protocols' shapes.

Anthropic ``document`` blocks, Chat ``file`` parts and Responses ``input_file``
parts all carry a PDF as base64 (Chat and Responses inside a ``data:`` URL); a
plain-text document exists only on Anthropic, so the OpenAI builders send it as a
text part headed by its title and context.
"""

from __future__ import annotations

import base64
import binascii

from . import ir

PDF = "application/pdf"
TEXT = "text/plain"
DEFAULT_FILENAME = "document.pdf"


def data_url(part: ir.DocumentPart) -> str:
    return f"data:{part.media_type or PDF};base64,{part.data or ''}"


def parse_data_url(value: str) -> tuple[str | None, str] | None:
    """``data:<media type>;base64,<payload>`` → (media type, payload); None when not one."""

    if not value.startswith("data:"):
        return None
    head, sep, payload = value[len("data:"):].partition(",")
    params = head.split(";")
    if not sep or "base64" not in params[1:]:
        return None
    return params[0] or None, payload


def filename(part: ir.DocumentPart) -> str:
    return part.filename or part.title or DEFAULT_FILENAME


def plain_text(part: ir.DocumentPart) -> str | None:
    """The text of a text document (or of a base64 ``text/*`` file); None for a PDF."""

    if part.text is not None:
        return part.text
    if part.data is not None and (part.media_type or "").startswith("text/"):
        try:
            return base64.b64decode(part.data, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    return None


def as_text(part: ir.DocumentPart) -> str | None:
    """A text document as one text part headed by its title and context; None for a PDF."""

    text = plain_text(part)
    if text is None:
        return None
    header = [line for line in (part.title, part.context) if line]
    return "\n\n".join([*header, text])
