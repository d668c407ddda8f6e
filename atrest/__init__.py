"""The gateway's own key management for what it keeps at rest: one key to write, several to read.

Upstream keys (``accounts.secrets``), stored Responses answers and their conversation items
(``conversations``) and request-log bodies (``accounts.RequestLog``, with body logging on) are
encrypted with Fernet (AES-128-CBC + HMAC-SHA256, from ``cryptography``) under keys derived from
the gateway's key material: ``GATEWAY_ENCRYPTION_KEY`` (or, unset, ``SECRET_KEY``) writes, and it
and every entry of ``GATEWAY_ENCRYPTION_OLD_KEYS`` (comma-separated) read (``MultiFernet``). Each
use has a derivation of its own (a purpose), so a token of one never opens as another.

Rotating the key: set the new material as ``GATEWAY_ENCRYPTION_KEY`` and the old one in
``GATEWAY_ENCRYPTION_OLD_KEYS``, restart, run ``manage.py reencrypt`` (everything is rewritten
under the new key), then drop the old material. A database copied without the key material
reveals nothing of what these fields hold.

This package imports only Django's settings and models: both ``accounts`` and ``conversations``
(which import neither each other nor anything above) use it.
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import models

PREFIX = "enc1:"  # an encrypted text value; anything else is a row written before encryption (read as is)
AT_REST = "gateway-at-rest"  # the purpose of the text fields below


class Unreadable(ValueError):
    """Encrypted under key material this gateway no longer has."""


def materials() -> tuple[str, ...]:
    """The key material: the one that writes first, then those still read."""

    current = settings.GATEWAY_ENCRYPTION_KEY or settings.SECRET_KEY
    old = [m.strip() for m in getattr(settings, "GATEWAY_ENCRYPTION_OLD_KEYS", ()) if m.strip()]
    return (current, *[m for m in old if m != current])


def _fernet(purpose: str, material: str) -> Fernet:
    digest = hashlib.sha256(f"{purpose}:{material}".encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


@lru_cache(maxsize=16)
def _keyring(purpose: str, keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([_fernet(purpose, material) for material in keys])


def keyring(purpose: str) -> MultiFernet:
    """The keys of ``purpose``: the current material's encrypts, all of them decrypt."""

    return _keyring(purpose, materials())


def encrypt(purpose: str, plain: str) -> str:
    return keyring(purpose).encrypt(plain.encode()).decode()


def decrypt(purpose: str, token: str) -> str:
    try:
        return keyring(purpose).decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise Unreadable(f"{purpose}: encrypted under key material this gateway is not given (set "
                         "GATEWAY_ENCRYPTION_KEY, and GATEWAY_ENCRYPTION_OLD_KEYS while rotating)") from exc


def seal(text: str) -> str:
    """``text`` as it is kept at rest ("" stays "": nothing to hide, and empty fields stay cheap)."""

    return PREFIX + encrypt(AT_REST, text) if text else text


def unseal(stored: str) -> str:
    """What :func:`seal` kept; a value written before encryption is returned as it is."""

    return decrypt(AT_REST, stored[len(PREFIX):]) if stored.startswith(PREFIX) else stored


class EncryptedTextField(models.TextField):  # type: ignore[type-arg]
    """A text column kept encrypted (:func:`seal`): the ORM reads and writes plain text; a raw query
    must :func:`seal` what it writes and :func:`unseal` what it reads."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return unseal(value) if isinstance(value, str) else value

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        return seal(value) if isinstance(value, str) else value


def reencrypt(model: Any, fields: list[str], chunk: int = 500) -> int:
    """Write ``fields`` of every row of ``model`` (a model, or a migration's historical one, whose
    fields are :class:`EncryptedTextField`) again under the current key: a row kept in plain text
    (written before encryption) is encrypted, one under an old key re-encrypted. Rows whose fields
    are all empty are skipped. Returns the rows written."""

    from django.db import transaction
    from django.db.models import Q

    rows = model._base_manager.exclude(Q(**{f: "" for f in fields})).order_by("pk")
    done, last = 0, None
    while True:
        page = list((rows if last is None else rows.filter(pk__gt=last)).values_list("pk", *fields)[:chunk])
        if not page:
            return done
        with transaction.atomic():
            for pk, *values in page:  # read plain (the field opens it), written sealed (the field seals it)
                model._base_manager.filter(pk=pk).update(**dict(zip(fields, values)))
        done += len(page)
        last = page[-1][0]
