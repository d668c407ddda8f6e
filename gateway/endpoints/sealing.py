"""Sealed compaction summaries: text only this gateway can read back, for the key it was sealed for.

When the gateway compacts a conversation itself (its upstream speaks Chat or Messages, which
have no compaction of their own), the summary goes back to the client inside a Responses
``compaction`` item's ``encrypted_content``, and comes back on the next turn to be expanded.
It is sealed with Fernet (AES-128-CBC + HMAC-SHA256, from ``cryptography``) under a key derived
from the gateway's key material (``GATEWAY_ENCRYPTION_KEY`` or ``SECRET_KEY``), so the client
can neither read nor alter it, and every gateway sharing that key can open it. A derivation of
its own keeps these tokens from ever opening as an upstream key (``accounts.secrets``), or the
reverse.

What is sealed is the summary and the id of the client key it was made for; Fernet stamps the
time. An item opens only for that key (another key holding a copy reads someone else's
conversation: refused, nothing sent upstream) and only while younger than ``ttl`` seconds
(``GATEWAY_COMPACTION_ITEM_DAYS``, by default the stored answers' retention). The conversation
is not sealed in: Codex carries its items into a forked conversation, under a new id.

The ``gwc2.`` prefix tells our items from OpenAI's own (which are Fernet tokens too, ``gAAAA…``):
an item without it was not sealed here, whatever its bytes. ``gwc1.`` items (sealed before the
key was, and so open to any key) are no longer opened.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import time
from dataclasses import dataclass

import orjson
from cryptography.fernet import Fernet, InvalidToken

PREFIX = "gwc2."
OLD_PREFIXES = ("gwc1.",)


class Refusal(enum.Enum):
    NOT_OURS = "not sealed by this gateway, or altered"
    UNBOUND = "sealed by an earlier version of this gateway, for no key in particular"
    OTHER_KEY = "sealed for another API key"
    EXPIRED = "expired"


@dataclass(frozen=True)
class Opened:
    summary: str | None  # None when refused
    refusal: Refusal | None = None


class Sealer:
    def __init__(self, material: str, ttl: float | None = None) -> None:
        """``ttl``: seconds an item opens for after it was sealed; None, or 0, for ever."""

        digest = hashlib.sha256(("gateway-compaction:" + material).encode()).digest()
        self._fernet = Fernet(base64.urlsafe_b64encode(digest))
        self.ttl = ttl or None

    def seal(self, text: str, key_id: int) -> str:
        return PREFIX + self._fernet.encrypt(orjson.dumps({"k": key_id, "s": text})).decode()

    def open(self, token: object, key_id: int, now: float | None = None) -> Opened:
        """The sealed text if ``token`` was sealed here for ``key_id`` and has not expired; else why not."""

        if isinstance(token, str) and token.startswith(OLD_PREFIXES):
            return Opened(None, Refusal.UNBOUND)
        if not isinstance(token, str) or not token.startswith(PREFIX):
            return Opened(None, Refusal.NOT_OURS)
        raw = token[len(PREFIX):].encode()
        try:
            sealed = orjson.loads(self._fernet.decrypt(raw))
            stamped = self._fernet.extract_timestamp(raw)
        except (InvalidToken, orjson.JSONDecodeError):
            return Opened(None, Refusal.NOT_OURS)
        if not isinstance(sealed, dict) or not isinstance(sealed.get("s"), str):
            return Opened(None, Refusal.NOT_OURS)
        if sealed.get("k") != key_id:
            return Opened(None, Refusal.OTHER_KEY)
        if self.ttl is not None and (now if now is not None else time.time()) - stamped > self.ttl:
            return Opened(None, Refusal.EXPIRED)
        return Opened(sealed["s"])


def ours(token: object) -> bool:
    """Whether ``token`` claims to be sealed by a gateway (it may still fail to open)."""

    return isinstance(token, str) and token.startswith((PREFIX, *OLD_PREFIXES))
