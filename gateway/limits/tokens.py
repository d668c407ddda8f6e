"""A local input-token estimate for /v1/messages/count_tokens, from the raw Messages body.

Used when the upstream cannot count (a Chat or Responses provider) or fails to.
It runs on the request path, so it is pure Python over C-speed primitives: no
tokenizer, no regex over the text.

Text. Claude's tokenizer (like GPT's) first splits text into runs of letters,
of digits, of punctuation and of whitespace, then merges each run into
vocabulary pieces: a common word is one token, a long or rare one two or
three, a digit run one or two, most punctuation one a character, a CJK
character about one. So the estimate is a weighted count of those runs and
characters (``TEXT_WEIGHTS``), each counted by one ``bytes.translate`` into
character classes and ``bytes.count``. The weights are a least-squares fit
against Claude's public tokenizer (``@anthropic-ai/tokenizer``) over
generated prose, Python and JavaScript, Chinese, Japanese, JSON tool schemas
and Markdown documents, and over real files (the GPL and Apache licences,
Python's argparse and json modules, Node's API docs, apt's Chinese and
Russian messages, package-lock JSON, numbers, base64, UUIDs). Every sample
came within 17 % (tests/gateway/test_tokens.py checks the categories at 25 %).
Plain characters-per-token could not: English runs 4.8 characters a token,
code 3.3, JSON 3.8 and Chinese 1.1.

Media, by Anthropic's documented rules: an image costs width × height / 750
tokens after it is scaled down to a long edge of 1568 pixels and about 1,600
tokens (the vision docs); a PDF page is read as an image of the page plus its
extracted text (the PDF support docs), so each page costs a page-sized image
at that cap (1,600; a third-party measurement of a scanned page on the API
gave 1,592–1,600) plus the tokens of the text it shows (``pdf_scan``).
"""

from __future__ import annotations

import math
from typing import Any

from translation import sse

from ..errors import NestingTooDeep
from .image_size import image_size
from .pdf_scan import scan_pdf

LETTERS = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
DIGITS = b"0123456789"
PUNCTUATION = b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"

# Tokens per counted unit of text (see the module docstring for the fit).
TEXT_WEIGHTS = {
    "letter_runs": 0.65, "letters": 0.06, "uppercase": 0.65, "punctuation_runs": 0.6, "punctuation": 0.3,
    "digit_runs": 1.5, "newlines": 1.1,
    "two_byte": 0.55,    # Latin with accents, Greek, Cyrillic, Hebrew, Arabic
    "three_byte": 0.93,  # CJK, kana, hangul, Indic scripts, typographic punctuation
    "four_byte": 2.0,    # emoji and rare ideographs: several byte-level pieces
}

IMAGE_PIXELS_PER_TOKEN = 750
IMAGE_MAX_LONG_EDGE = 1568
IMAGE_MAX_TOKENS = 1600
# An image whose size cannot be read (a URL, a file id, an unknown format) is assumed as large as
# an image can be: the estimate is used to keep within a context window, where too high is safe.
IMAGE_UNKNOWN_TOKENS = IMAGE_MAX_TOKENS
PDF_PAGE_IMAGE_TOKENS = IMAGE_MAX_TOKENS
HEX_GLYPHS_PER_TOKEN = 4.5  # glyphs of an English-like text, spaces not shown as glyphs
# A PDF not in the body (URL, file id): one page and a typical page of text (≈ 500–700 measured).
PDF_UNKNOWN_TOKENS = PDF_PAGE_IMAGE_TOKENS + 600
# The system prompt Anthropic adds when tools are present (tool-use pricing docs, Claude 4 models).
TOOLS_PROMPT_TOKENS = {"auto": 346, "none": 346, "any": 313, "tool": 313}
MESSAGE_TOKENS = 3  # the turn's role marker and separators
MAX_DEPTH = 64
# Fields of an unknown block that are ids, signatures or payloads, never text the model reads.
_NOT_TEXT = frozenset({"type", "id", "tool_use_id", "signature", "data", "encrypted_content", "cache_control",
                       "media_type", "file_id", "citations"})


def _classes() -> bytes:
    table = bytearray(b" " * 256)
    for c in LETTERS[:26]:
        table[c] = ord("a")
    for c in LETTERS[26:]:
        table[c] = ord("A")
    for c in DIGITS:
        table[c] = ord("0")
    for c in PUNCTUATION:
        table[c] = ord(".")
    table[ord("\n")] = ord("\n")
    for lead, mark in ((0xC0, "2"), (0xE0, "3"), (0xF0, "4")):
        for c in range(lead, lead + (0x20 if lead == 0xC0 else 0x10)):
            table[c] = ord(mark)
    return bytes(table)


def _only(chars: bytes) -> bytes:
    table = bytearray(b" " * 256)
    for c in chars:
        table[c] = ord("x")
    return bytes(table)


_CLASSES = _classes()
_LETTER_RUNS, _DIGIT_RUNS, _PUNCTUATION_RUNS = _only(LETTERS), _only(DIGITS), _only(PUNCTUATION)


def _runs(data: bytes, table: bytes) -> int:
    marked = data.translate(table)
    return marked.count(b" x") + (marked[:1] == b"x")


def text_tokens(text: str) -> float:
    if not text:
        return 0.0
    data = text.encode("utf-8", "surrogatepass")
    c = data.translate(_CLASSES)
    w = TEXT_WEIGHTS
    lower, upper = c.count(b"a"), c.count(b"A")
    total = (w["letter_runs"] * _runs(data, _LETTER_RUNS) + w["letters"] * (lower + upper)
             + w["uppercase"] * upper + w["punctuation"] * c.count(b".")
             + w["punctuation_runs"] * _runs(data, _PUNCTUATION_RUNS)
             + w["digit_runs"] * _runs(data, _DIGIT_RUNS) + w["newlines"] * c.count(b"\n"))
    if len(data) > len(text):  # not all ASCII
        total += w["two_byte"] * c.count(b"2") + w["three_byte"] * c.count(b"3") + w["four_byte"] * c.count(b"4")
    return total


def image_tokens(width: int, height: int) -> int:
    """Anthropic's vision formula, after the documented downscaling."""

    if width <= 0 or height <= 0:
        return IMAGE_UNKNOWN_TOKENS
    scale = min(1.0, IMAGE_MAX_LONG_EDGE / max(width, height),
                math.sqrt(IMAGE_MAX_TOKENS * IMAGE_PIXELS_PER_TOKEN / (width * height)))
    return max(1, math.ceil(int(width * scale) * int(height * scale) / IMAGE_PIXELS_PER_TOKEN))


def estimate_input_tokens(body: dict[str, Any]) -> int:
    """The input tokens of a Messages (count_tokens) body, estimated."""

    counter = _Counter()
    counter.content(body.get("system"), 0)
    messages = body.get("messages")
    if isinstance(messages, list):
        current = _current_turn(messages)
        for i, msg in enumerate(messages):
            if isinstance(msg, dict):
                counter.fixed += MESSAGE_TOKENS
                counter.content(msg.get("content"), 0, thinking=i >= current)
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        choice = body.get("tool_choice")
        mode = choice.get("type") if isinstance(choice, dict) else None
        counter.fixed += TOOLS_PROMPT_TOKENS.get(mode if isinstance(mode, str) else "auto", TOOLS_PROMPT_TOKENS["auto"])
        for tool in tools:
            if isinstance(tool, dict):
                counter.json({k: v for k, v in tool.items() if k != "cache_control"})
    return max(1, round(counter.fixed + text_tokens(" ".join(counter.texts))))


def _current_turn(messages: list[Any]) -> int:
    """Where the current turn starts: after the last user message that is not only tool results.

    Thinking blocks of earlier assistant turns are ignored by the count (Anthropic's
    token-counting docs); those of the current turn (a tool-use loop) count.
    """

    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if not isinstance(msg, dict) or msg.get("role") != "user":
            continue
        content = msg.get("content")
        if not isinstance(content, list) or any(
                not (isinstance(b, dict) and b.get("type") == "tool_result") for b in content):
            return i
    return 0


class _Counter:
    """Text to tokenize in one pass, plus the tokens already known (media, fixed prompts)."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.fixed = 0.0

    def content(self, content: Any, depth: int, thinking: bool = True) -> None:
        if isinstance(content, str):
            self.texts.append(content)
        elif isinstance(content, list) and depth < MAX_DEPTH:
            for block in content:
                if isinstance(block, dict):
                    self.block(block, depth + 1, thinking)
                elif isinstance(block, str):
                    self.texts.append(block)

    def block(self, block: dict[str, Any], depth: int, thinking: bool) -> None:
        kind = block.get("type")
        if kind == "text":
            self.content(block.get("text"), depth)
        elif kind == "image":
            self.image(block.get("source"))
        elif kind == "document":
            self.document(block, depth)
        elif kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
            self.content(block.get("name"), depth)
            self.json(block.get("input", {}))
        elif kind == "tool_result":
            self.content(block.get("content"), depth)
        elif kind == "thinking":
            if thinking:
                self.content(block.get("thinking"), depth)
        elif kind == "redacted_thinking":
            pass  # encrypted; and like thinking, earlier turns' is not counted
        else:
            self.strings(block, depth)

    def image(self, source: Any) -> None:
        size = None
        if isinstance(source, dict) and source.get("type") == "base64" and isinstance(source.get("data"), str):
            size = image_size(source["data"])
        self.fixed += image_tokens(*size) if size else IMAGE_UNKNOWN_TOKENS

    def document(self, block: dict[str, Any], depth: int) -> None:
        for field in ("title", "context"):
            self.content(block.get(field), depth)
        source = block.get("source")
        if not isinstance(source, dict):
            return
        kind = source.get("type")
        if kind == "text":
            self.content(source.get("data"), depth)
        elif kind == "content":
            self.content(source.get("content"), depth)
        elif kind == "base64" and isinstance(source.get("data"), str):
            facts = scan_pdf(source["data"])
            if facts is None:
                self.fixed += PDF_UNKNOWN_TOKENS
                return
            self.fixed += facts.pages * PDF_PAGE_IMAGE_TOKENS + facts.hex_glyphs / HEX_GLYPHS_PER_TOKEN
            self.texts.append(facts.text)
        else:
            self.fixed += PDF_UNKNOWN_TOKENS

    def json(self, value: Any) -> None:
        try:
            self.texts.append(sse.dumps(value))
        except TypeError as exc:  # nested too deep to serialise
            raise NestingTooDeep from exc

    def strings(self, value: Any, depth: int) -> None:
        """Every string a block of a type not known here carries, ids and payloads left out."""

        if depth >= MAX_DEPTH:
            return
        if isinstance(value, str):
            self.texts.append(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in _NOT_TEXT:
                    self.strings(item, depth + 1)
        elif isinstance(value, list):
            for item in value:
                self.strings(item, depth + 1)
