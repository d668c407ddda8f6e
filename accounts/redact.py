"""Secrets out of anything stored or shown: upstream error excerpts, attempt traces, logged bodies."""

from __future__ import annotations

import re
from collections.abc import Iterable

EXCERPT_LIMIT = 500
_SECRETISH = re.compile(r"(sk-[A-Za-z0-9_\-]{4,}|gw-[A-Za-z0-9_\-]{4,}|Bearer\s+\S+|key[\"'=:\s]+[A-Za-z0-9_\-]{16,})")


def redact(text: str, secrets: Iterable[str] = (), limit: int = EXCERPT_LIMIT) -> str:
    """An excerpt safe to store and show: known secrets and anything key-shaped removed."""

    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    text = _SECRETISH.sub("[redacted]", text)
    return text[:limit]
