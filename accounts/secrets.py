"""Secrets at rest: upstream keys are encrypted, client keys are hashed.

The encryption key comes from ``GATEWAY_ENCRYPTION_KEY`` (or, failing that, is
derived from ``SECRET_KEY``) so that a copied database alone reveals nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


@lru_cache(maxsize=4)
def _fernet(material: str) -> Fernet:
    digest = hashlib.sha256(("gateway-secrets:" + material).encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def _current() -> Fernet:
    return _fernet(settings.GATEWAY_ENCRYPTION_KEY or settings.SECRET_KEY)


def encrypt(plain: str) -> str:
    return _current().encrypt(plain.encode()).decode()


@lru_cache(maxsize=4096)
def _decrypt(token: str, material: str) -> str:
    return _fernet(material).decrypt(token.encode()).decode()


def decrypt(token: str) -> str:
    # Cached: the hot path decrypts the chosen account's key on every request.
    try:
        return _decrypt(token, settings.GATEWAY_ENCRYPTION_KEY or settings.SECRET_KEY)
    except InvalidToken as exc:
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
