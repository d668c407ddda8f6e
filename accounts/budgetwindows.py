"""A budget's rolling window, counted in slices: which slices are live, and when spending frees.

A window is a duration (5 hours, 24 hours, 7 days, 30 days) counted in about 60
slices aligned to multiples of the slice width since the epoch, so that every
process names a slice alike from its clock and one Redis hash field holds it. A
slice counts while any part of it is inside the window: the window reaches back
up to one slice further than its name (5 hours and up to 5 minutes). What a key
spent is the sum over the live slices; when that reaches the limit, the oldest
slices leaving the window free it.

Pure arithmetic on Unix seconds, kept beside the keys and teams whose budgets it counts (the
:class:`Subject` of a budget):
the gateway's limits enforce it (``gateway.limits.store`` and its Lua use the same
rules, and ``tests/gateway/limits/test_store.py`` checks that both stores agree),
and the dashboard shows what each key spent in the same windows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Window:
    name: str  # in counter names, and ``KeyInfo.usd_budgets``
    seconds: int  # the window's length
    width: int  # a slice's: divides ``seconds``, a multiple of 300 (the spend buckets' width)
    phrase: str  # in messages: "($5.12 in <phrase>)"
    adjective: str  # in messages: "the <adjective> USD budget"

    def slice_of(self, t: float) -> int:
        """The start of the slice ``t`` (Unix seconds) falls in."""

        return int(t // self.width) * self.width

    def first(self, now: float) -> int:
        """The start of the oldest live slice: the one the window's far end falls in."""

        return self.slice_of(now - self.seconds)

    @property
    def keep(self) -> int:
        """How long a slice's counter is worth keeping after it was last added to."""

        return self.seconds + self.width

    def out_at(self, slice_start: int) -> int:
        """When the slice starting at ``slice_start`` leaves the window (``first`` passes it)."""

        return slice_start + self.width + self.seconds


KEY, TEAM = "key", "team"


@dataclass(frozen=True)
class Subject:
    """Whose spending a budget counts: one client key's (``KEY``), or a team's (``TEAM``), summed over
    the keys in the team (``accounts.models.client_key_ids``)."""

    kind: str
    id: int
    name: str


def freeing(slices: Mapping[int, int], limit: int) -> int | None:
    """The start of the newest slice that must leave the window for the rest to be under ``limit``
    (None if the rest is already under it, or if nothing can ever be: a limit of 0)."""

    left = sum(slices.values())
    if left < limit:
        return None
    for start in sorted(slices):
        left -= slices[start]
        if left < limit:
            return start
    return None


FIVE_HOURS = Window("5h", 5 * 3600, 300, "the last 5 hours", "5-hour")
DAY = Window("day", 86_400, 1800, "the last 24 hours", "24-hour")
WEEK = Window("week", 7 * 86_400, 3 * 3600, "the last 7 days", "7-day")
MONTH = Window("month", 30 * 86_400, 12 * 3600, "the last 30 days", "30-day")
WINDOWS = {w.name: w for w in (FIVE_HOURS, DAY, WEEK, MONTH)}
