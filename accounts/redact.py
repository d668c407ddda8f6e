"""Secrets out of anything stored or shown: upstream error excerpts, attempt traces, disable events,
logged bodies, probe summaries, and the dashboard's second look at all of them.

Two kinds of secret are removed. **Known ones**: the gateway's own upstream keys,
matched exactly (a :class:`SecretSet`, built once per set of keys, or a short list
for one account's error text). **Shaped ones**: the common credential formats a
person may paste into a prompt or an upstream may echo: OpenAI and Anthropic keys
(``sk-…``, ``sk-proj-…``, ``sk-ant-…``), the gateway's client keys (``gw-…``),
Google API keys and OAuth tokens, AWS access key ids and secret keys, GitHub,
Slack and Stripe tokens, JWTs, private key blocks, ``Authorization`` headers,
credentials in URLs and ``api_key=…``-style assignments.

Each shape is anchored on a vendor prefix or a naming context (``Authorization:``,
``aws_secret_access_key=``), never on "a long random-looking string" alone: prose,
code, base64 images and hashes pass untouched. Where the context is kept (the
header name, the URL's host) only the credential becomes ``[redacted]``.

Cost, measured on the 2-core dev machine (``tests/accounts/test_redact.py`` prints
it): ~0.14 ms a 16 KB JSON body of prose and code, and 0.01 ms more for 1,000
known keys. The shapes are 19 patterns, each opening with a literal, so each is
one scan of the text at ``str.find`` speed (one alternation of them all was 3 ms:
the engine then tries every branch at every position); the known keys are one
dictionary lookup per long run of token characters (:class:`SecretSet`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import AnyStr

EXCERPT_LIMIT = 500
MARK = "[redacted]"
# Shorter known secrets are not matched: too likely to occur in ordinary text.
MIN_SECRET = 8

# key: value, key=value, "key": "value", and the last as it is inside a JSON string (\"key\": \"value\").
_ASSIGN = r"""(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?"""
# A credential's value: 8+ characters, a digit among them, up to a quote, a separator or an escape.
_VALUE = r"""(?=[^\s"'&,;\\]*[0-9])[^\s"'&,;\\]{8,}"""


def _after(literal: str) -> str:
    """A look-behind placed after ``literal``: it must start a token (not the "sk-" of "task-list"),
    or follow a JSON escape (``\\nsk-…`` in a logged body is a key on a new line).

    The literal comes first and the boundary is checked behind it: a pattern that opens with
    a literal is searched for as fast as ``str.find``; one that opens with a look-behind or
    a set of characters is tried at every position (60 times slower).
    """

    return (f"(?:(?<![A-Za-z0-9]{literal})|(?<=\\\\[nrtbf]{literal})"
            f"|(?<=\\\\u[0-9A-Fa-f]{{4}}{literal}))")


# Each pattern opens with a literal, one scan of the text each (patterns sharing a first literal
# are one pattern), and has at most one group: the context that stays in the text.
# Matched as written: the vendors' formats, whose prefixes have one case.
_CASED = [
    # Private keys (PEM, OpenSSH, PGP), through their END line, or to the end of a cut text.
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
    r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)",
    # OpenAI (sk-, sk-proj-, sk-svcacct-), Anthropic (sk-ant-) and other sk- keys; Stripe-style
    # secret keys (sk_live_, sk_test_) and restricted ones (rk_live_).
    r"sk(?:-" + _after("sk-") + r"[A-Za-z0-9_\-]{4,}|_" + _after("sk_") + r"(?:live|test)_[A-Za-z0-9]{10,})",
    r"rk_" + _after("rk_") + r"(?:live|test)_[A-Za-z0-9]{10,}",
    r"gw-" + _after("gw-") + r"[A-Za-z0-9_\-]{4,}",  # the gateway's client keys
    # Google API keys; AWS access key ids, long-term (AKIA) and temporary (ASIA).
    r"A(?:Iza[0-9A-Za-z_\-]{35}|[KS]IA" + _after("A[KS]IA") + r"[A-Z0-9]{16}(?![A-Za-z0-9]))",
    r"ya29\.[0-9A-Za-z_\-]{20,}",  # Google OAuth access token
    # GitHub: personal, OAuth, user-to-server, server-to-server and refresh tokens; fine-grained ones.
    r"gh[pousr]_" + _after("gh[pousr]_") + r"[A-Za-z0-9]{30,}",
    r"github_pat_[A-Za-z0-9_]{20,}",
    # Slack: bot, user, … tokens and app-level tokens.
    r"x(?:ox[abprs]|app)-" + _after("xox[abprs]-") + _after("xapp-") + r"[A-Za-z0-9\-]{10,}",
    r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",  # JWT (header.payload.signature)
    r"(://)[^/\s:@\"']+:[^/\s@\"']+(?=@)",  # user:password@ in a URL (the host stays)
]
# Matched in any case (names people and programs spell as they like): written in lower case and
# searched in a lower-cased copy of the text, where a literal is again found fast.
_ANY_CASE = [
    # Authorization and Proxy-Authorization headers, whatever the scheme (Bearer, Basic, token …).
    r"(authorization" + _ASSIGN + r")(?:[a-z]+[ \t]+)?[a-z0-9._~+/=\-]{8,}",
    # A bearer token outside a header: it must contain a digit or - _ . ("Bearer instruments" stays).
    r"(bearer[ \t]+)(?=[a-z0-9._~+/=\-]*[0-9_.\-])[a-z0-9._~+/\-]{8,}=*",
    # AWS secret keys after their name (aws_secret_access_key=…, "SecretAccessKey": "…"), any
    # 40-character key-like value after a "secret" (client_secret), or a credential-like one.
    r"(secret(?:[_-]?access[_-]?key)?" + _ASSIGN + r")(?:[a-z0-9/+]{40}(?![a-z0-9/+])|" + _VALUE + ")",
    # Named credentials: api_key=…, x-api-key: …, "access_token": "…", passwords, and the same
    # names in URL queries (?key=…&, X-Amz-Signature=…): each name's last word opens its pattern.
    *(f"({name}" + _ASSIGN + ")" + _VALUE for name in ("key", "token", "passw(?:or)?d", "signature",
                                                      "credential")),
]
_CASED_RE = [re.compile(p) for p in _CASED]
_ANY_CASE_RE = [re.compile(p) for p in _ANY_CASE]
# For the rare text whose lower-case copy is longer (the Turkish İ becomes two characters) and so
# no longer lines up with it.
_IGNORE_CASE_RE = [re.compile(p, re.IGNORECASE) for p in _ANY_CASE]


def redact_shapes(text: str) -> str:
    """``text`` with every secret-shaped string replaced by ``[redacted]``."""

    spans: list[tuple[int, int]] = []
    _find(_CASED_RE, text, spans)
    lowered = text.lower()
    if len(lowered) == len(text):  # no character lower-cased to two: positions line up
        _find(_ANY_CASE_RE, lowered, spans)
    else:
        _find(_IGNORE_CASE_RE, text, spans)
    return _replace(text, spans, MARK)


def _find(patterns: list[re.Pattern[str]], text: str, spans: list[tuple[int, int]]) -> None:
    for pattern in patterns:
        for match in pattern.finditer(text):
            spans.append((match.end(1) if match.lastindex else match.start(), match.end()))


# The characters of a token (base64url): a credential stands in text as a run of them.
_TOKEN_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
_PIECE = re.compile(rb"[A-Za-z0-9_\-]+")
# Every byte to "a" (a token character) or " " (anything else, non-ASCII included): in this mask a
# run of n token characters is found by bytes.find(b"a" * n), at the speed of memchr.
_MASK = bytes(0x61 if i in _TOKEN_CHARS else 0x20 for i in range(256))


class SecretSet:
    """Exact secrets (the gateway's upstream keys), matched in one pass however many there are.

    Built once per set of keys (1,000 keys: a few ms). A key is found where it stands as
    a token, as credentials do in text: delimited by anything but letters, digits,
    ``-`` and ``_``. The text's runs of token characters at least as long as the
    shortest key are found in a byte mask of it and each looked up in a dictionary:
    ~10 µs a 16 KB body, whatever the number of keys (one regular expression of
    1,000 keys took 47 ms, and shaped as a trie still 1 ms; a run-finding regular
    expression 80 µs). A key with other characters in it (base64's ``+/=``) is
    looked up by its longest run of token characters and then compared whole.
    Each key is also matched as JSON writes it (``"``, ``\\``, control characters
    and, by some encoders, ``/`` escaped), since logged bodies are JSON.
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        # longest run of token characters → (its offset in the form, the key in one of its forms)
        self._anchors: dict[bytes, list[tuple[int, bytes]]] = {}
        self._odd: set[str] = set()  # keys without a run of 4 token characters: replaced one by one
        for secret in secrets:
            if len(secret) < MIN_SECRET:
                continue
            escaped = json.dumps(secret, ensure_ascii=False)[1:-1]
            for form in {secret, escaped, escaped.replace("/", "\\/")}:
                raw = form.encode("utf-8", "surrogatepass")
                anchor = max(_PIECE.findall(raw), key=len, default=b"")
                if len(anchor) < 4:
                    self._odd.add(form)
                elif (entry := (raw.index(anchor), raw)) not in self._anchors.get(anchor, ()):
                    self._anchors.setdefault(anchor, []).append(entry)
        self._needle = b"a" * min(map(len, self._anchors), default=4)

    def __bool__(self) -> bool:
        return bool(self._anchors or self._odd)

    def __len__(self) -> int:
        return sum(map(len, self._anchors.values())) + len(self._odd)

    def sub(self, text: str) -> str:
        for form in self._odd:
            text = text.replace(form, MARK)
        if not self._anchors:
            return text
        data = text.encode("utf-8", "surrogatepass")
        spans = self._find(data)
        if not spans:
            return text
        return _replace(data, spans, MARK.encode()).decode("utf-8", "surrogatepass")

    def _find(self, data: bytes) -> list[tuple[int, int]]:
        anchors, needle = self._anchors, self._needle
        mask = data.translate(_MASK)
        spans: list[tuple[int, int]] = []
        at = mask.find(needle)
        while at >= 0:
            end = mask.find(b" ", at)
            if end < 0:
                end = len(mask)
            run = data[at:end]
            hits = anchors.get(run)
            if hits is None and at and data[at - 1] == 0x5C:  # a backslash
                # A JSON escape glued to the key's front (\n, \t, \u00a0): its letters joined the run.
                for skip in (1, 5):
                    hits = anchors.get(run[skip:])
                    if hits is not None:
                        at += skip
                        break
            for offset, form in hits or ():
                if data.startswith(form, at - offset):
                    spans.append((at - offset, at - offset + len(form)))
                    break
            at = mask.find(needle, end)
        return spans


def _replace(text: AnyStr, spans: list[tuple[int, int]], mark: AnyStr) -> AnyStr:
    """``text`` with each span (overlapping ones as one) replaced by ``mark``."""

    if not spans:
        return text
    spans.sort()
    out: list[AnyStr] = []
    done = 0
    for start, end in spans:
        if end <= done:
            continue  # inside what an earlier span removed
        if start >= done:
            out.append(text[done:start])
            out.append(mark)
        done = end
    out.append(text[done:])
    return text[:0].join(out)


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n",
                  "\r": "\\r", "\t": "\\t"}


def _unicode_escape(code: int) -> str:
    """``\\uXXXX`` as a pattern, the hex digits in either case."""

    return "\\\\+u" + "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d for d in f"{code:04x}")


@lru_cache(maxsize=1024)
def _spellings(secret: str) -> re.Pattern[str]:
    """``secret`` in every way a JSON string may spell it: each character as itself, as ``\\uXXXX``
    (hex in either case; a pair of them beyond the BMP), or as its short escape (``\\/`` for ``/``);
    an escape with any number of backslashes (JSON inside a JSON string escapes its escapes)."""

    parts = []
    for char in secret:
        ways = [re.escape(char)]
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            ways.append(_unicode_escape(0xD800 + (code >> 10)) + _unicode_escape(0xDC00 + (code & 0x3FF)))
        else:
            ways.append(_unicode_escape(code))
        if char in _SHORT_ESCAPES:
            ways.append("\\\\+" + re.escape(_SHORT_ESCAPES[char][1:]))
        parts.append("(?:" + "|".join(ways) + ")")
    return re.compile("".join(parts))


def without_secret(text: str, secret: str) -> str:
    """``text`` with ``secret`` replaced by ``[redacted]``, however it is spelled: as itself, or JSON-escaped
    (an upstream's error body that echoes its key as ``sk-a\\/b`` or ``sk\\u002da`` is still readable to
    whoever decodes it). A text without ``\\u`` or ``\\/`` costs one ``str.replace``; one with, a scan
    of a pattern built once per secret: 1.6 ms for 18 KB of JSON (the engine tries the pattern at each
    position), paid on error paths only (an error body is read up to 64 KB)."""

    if not secret:
        return text
    text = text.replace(secret, MARK)
    if "\\u" not in text and "\\/" not in text and not any(c in _SHORT_ESCAPES for c in secret):
        return text  # nothing else can spell it (a body's \\n and \\" alone cannot)
    return _spellings(secret).sub(MARK, text)


def redact(text: str, secrets: Iterable[str] | SecretSet = (), limit: int = EXCERPT_LIMIT) -> str:
    """``text`` safe to store and show, cut to ``limit`` characters: the given secrets (however JSON
    spells them, when given as a list) and every secret-shaped string removed."""

    if isinstance(secrets, SecretSet):
        text = secrets.sub(text)
    else:
        for secret in secrets:
            text = without_secret(text, secret)
    return redact_shapes(text)[:limit]
