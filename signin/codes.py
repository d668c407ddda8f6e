"""The secrets of a sign-in: device codes, user codes, access and refresh tokens (no I/O)."""

from __future__ import annotations

import secrets

from accounts.secrets import hash_client_key

# RFC 8628 §6.1: consonants only (no vowels, so no words), no look-alikes; 20^8 ≈ 2^34.6 codes.
USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"
USER_CODE_LENGTH = 8
# Bearer and refresh tokens: the prefix tells a leaked one apart (and accounts.redact removes any
# "gw-…" from what the gateway stores); 32 random bytes each, like client keys.
ACCESS_PREFIX = "gw-at-"
REFRESH_PREFIX = "gw-rt-"


def new_device_code() -> str:
    """Opaque, 256 bits of randomness (RFC 8628 §5.2 asks for enough to make guessing futile)."""

    return secrets.token_urlsafe(32)


def new_user_code() -> str:
    return "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(USER_CODE_LENGTH))


def shown_user_code(code: str) -> str:
    """``WDJBMJHT`` as people read it: ``WDJB-MJHT``."""

    return f"{code[:4]}-{code[4:]}"


def normalize_user_code(typed: str) -> str:
    """What a person typed, as stored: case, dashes and spaces are theirs to choose (RFC 8628 §6.1)."""

    return "".join(c for c in typed.upper() if c.isalnum())


def new_access_token() -> str:
    return ACCESS_PREFIX + secrets.token_urlsafe(32)


def new_refresh_token() -> str:
    return REFRESH_PREFIX + secrets.token_urlsafe(32)


def looks_like_bearer(plain: str) -> bool:
    return plain.startswith(ACCESS_PREFIX)


def digest(plain: str) -> str:
    """How every secret of a sign-in is stored and looked up: the client keys' keyed hash."""

    return hash_client_key(plain)
