"""Sealed compaction summaries: text only this gateway can read back.

When the gateway compacts a conversation itself (its upstream speaks Chat or Messages, which
have no compaction of their own), the summary goes back to the client inside a Responses
``compaction`` item's ``encrypted_content``, and comes back on the next turn to be expanded.
It is sealed with Fernet (AES-128-CBC + HMAC-SHA256, from ``cryptography``) under a key derived
from the gateway's key material (``GATEWAY_ENCRYPTION_KEY`` or ``SECRET_KEY``), so the client
can neither read nor alter it, and every gateway sharing that key can open it. A derivation of
its own keeps these tokens from ever opening as an upstream key (``accounts.secrets``), or the
reverse.

The ``gwc1.`` prefix tells our items from OpenAI's own (which are Fernet tokens too, ``gAAAA…``):
an item without it was not sealed here, whatever its bytes.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken

PREFIX = "gwc1."


class Sealer:
    def __init__(self, material: str) -> None:
        digest = hashlib.sha256(("gateway-compaction:" + material).encode()).digest()
        self._fernet = Fernet(base64.urlsafe_b64encode(digest))

    def seal(self, text: str) -> str:
        return PREFIX + self._fernet.encrypt(text.encode()).decode()

    def open(self, token: object) -> str | None:
        """The sealed text, or None for anything this gateway did not seal (or that was altered)."""

        if not isinstance(token, str) or not token.startswith(PREFIX):
            return None
        try:
            return self._fernet.decrypt(token[len(PREFIX):].encode()).decode()
        except (InvalidToken, UnicodeDecodeError):
            return None


def ours(token: object) -> bool:
    """Whether ``token`` claims to be sealed by a gateway (it may still fail to open)."""

    return isinstance(token, str) and token.startswith(PREFIX)
