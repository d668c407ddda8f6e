"""Identifiers in each protocol's own style."""

from __future__ import annotations

import secrets


def new_id(prefix: str, nbytes: int = 12) -> str:
    return prefix + secrets.token_hex(nbytes)
