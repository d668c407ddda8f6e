"""Secrets at rest: upstream keys are encrypted, client keys are hashed.

The encryption is the gateway's own key management (``atrest``): ``GATEWAY_ENCRYPTION_KEY`` (or,
failing that, ``SECRET_KEY``) writes, ``GATEWAY_ENCRYPTION_OLD_KEYS`` are still read while a key
is rotated, so that a copied database alone reveals nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from functools import lru_cache

import atrest

PURPOSE = "gateway-secrets"


def encrypt(plain: str) -> str:
    return atrest.encrypt(PURPOSE, plain)


@lru_cache(maxsize=4096)
def _decrypt(token: str, materials: tuple[str, ...]) -> str:
    return atrest.decrypt(PURPOSE, token)


def decrypt(token: str) -> str:
    # Cached: the hot path decrypts the chosen account's key on every request.
    try:
        return _decrypt(token, atrest.materials())
    except atrest.Unreadable as exc:
        raise ValueError("secret cannot be decrypted with the configured key") from exc


def mask(plain: str) -> str:
    """``sk-…a1b2``: enough for ops to tell keys apart, never enough to use one."""

    if len(plain) <= 8:
        return "…" + plain[-2:]
    head = plain[:3] if plain[2:3] == "-" else plain[:2]
    return f"{head}…{plain[-4:]}"


def hash_client_key(plain: str) -> str:
    # Client keys are random, so a keyed fast hash is enough (no password stretching needed).
    return hmac.new(b"gateway-client-key", plain.encode(), hashlib.sha256).hexdigest()


def new_client_key() -> str:
    return "gw-" + secrets.token_urlsafe(32)


def hash_admin_key(plain: str) -> str:
    # Another key than client keys': an admin key's hash never matches a client key's, nor the reverse.
    return hmac.new(b"gateway-admin-key", plain.encode(), hashlib.sha256).hexdigest()


def new_admin_key() -> str:
    return "gw-admin-" + secrets.token_urlsafe(32)
