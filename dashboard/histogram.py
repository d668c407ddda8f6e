"""Time-to-first-byte histograms: fixed millisecond buckets that add up across rows.

Percentiles over a window come from summed bucket counts rather than from sorting
every request of the window, so a 7-day figure costs the same as a 1-hour one.
The price is resolution: a percentile is interpolated inside its bucket, and the
buckets are about 1.5× apart.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

# Upper bounds (inclusive, ms) of every bucket but the last, which holds anything slower.
BOUNDS: tuple[int, ...] = (
    10, 20, 30, 50, 75, 100, 150, 200, 300, 500, 750, 1_000, 1_500, 2_000, 3_000,
    5_000, 7_500, 10_000, 15_000, 20_000, 30_000, 60_000, 120_000,
)
SLOTS = len(BOUNDS) + 1
FIELDS: tuple[str, ...] = tuple(f"ttfb_{i}" for i in range(SLOTS))


def slot(ms: int) -> int:
    """The bucket a time to first byte falls in."""

    return bisect_left(BOUNDS, max(ms, 0))


def percentile(counts: Sequence[int], p: float) -> float | None:
    """The p-th percentile (0–100) of the values counted in ``counts``, None when empty.

    Linear interpolation inside the bucket; the open-ended last bucket reports its
    lower bound, which is all we know about those values.
    """

    total = sum(counts)
    if total == 0:
        return None
    rank = p / 100 * total
    seen = 0
    for i, n in enumerate(counts):
        if n and seen + n >= rank:
            if i == len(BOUNDS):
                return float(BOUNDS[-1])
            lower = BOUNDS[i - 1] if i else 0
            return lower + (BOUNDS[i] - lower) * max(rank - seen, 0) / n
        seen += n
    return float(BOUNDS[-1])
