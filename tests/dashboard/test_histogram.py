from __future__ import annotations

import random

import pytest

from dashboard import histogram


@pytest.mark.parametrize("ms, expected", [(0, 0), (10, 0), (11, 1), (20, 1), (120_000, 22), (120_001, 23), (-5, 0)])
def test_a_value_lands_in_the_bucket_whose_upper_bound_holds_it(ms: int, expected: int) -> None:
    assert histogram.slot(ms) == expected


def test_percentiles_of_an_empty_histogram_are_unknown() -> None:
    assert histogram.percentile([0] * histogram.SLOTS, 50) is None


def test_percentiles_stay_within_the_bucket_of_the_exact_value() -> None:
    rng = random.Random(5)
    values = sorted(int(rng.lognormvariate(5, 1)) for _ in range(5000))
    counts = [0] * histogram.SLOTS
    for v in values:
        counts[histogram.slot(v)] += 1
    for p in (50, 95, 99):
        exact = values[int(p / 100 * len(values)) - 1]
        estimate = histogram.percentile(counts, p)
        assert estimate is not None
        assert histogram.slot(int(estimate)) in (histogram.slot(exact), histogram.slot(exact) + 1)
        assert 0.6 * exact <= estimate <= 1.6 * exact


def test_the_open_ended_last_bucket_reports_its_lower_bound() -> None:
    counts = [0] * histogram.SLOTS
    counts[-1] = 3
    assert histogram.percentile(counts, 99) == histogram.BOUNDS[-1]
