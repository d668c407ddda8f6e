"""The providers found without a count_tokens endpoint (``gateway.endpoints.count_tokens``), each
remembered for a while so that the next counts are estimated without asking: state of the app object."""

from __future__ import annotations

import time
from typing import Any

REMEMBER_MISSING = 3600.0  # seconds a provider without count_tokens is not asked again


class NoCountEndpoint:
    """The providers found without count_tokens, each until its memory runs out (one per app)."""

    def __init__(self, remember: float = REMEMBER_MISSING) -> None:
        self._remember = remember
        self._until: dict[tuple[int, str], float] = {}

    def knows(self, provider: Any) -> bool:
        until = self._until.get((provider.id, provider.base_url))
        return until is not None and time.monotonic() < until

    def note(self, provider: Any) -> None:
        self._until[(provider.id, provider.base_url)] = time.monotonic() + self._remember
