"""The usage buckets agree with the request log they sum, however the rows arrive."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db.models import Count, Q, Sum

from accounts.models import RequestLog
from dashboard import histogram, rollup
from dashboard.models import UsageBucket
from tests.dashboard.conftest import make_account, record, write

pytestmark = pytest.mark.django_db


def bucket_totals() -> dict[int, dict[str, int]]:
    rows = UsageBucket.objects.values("account_id").annotate(
        requests=Sum("requests"), errors=Sum("errors"), input_tokens=Sum("input_tokens"),
        output_tokens=Sum("output_tokens"), latency_ms=Sum("latency_ms"),
        **{f: Sum(f) for f in histogram.FIELDS}).order_by()
    return {r.pop("account_id"): r for r in rows}


def log_totals() -> dict[int, dict[str, int]]:
    out = {}
    for r in RequestLog.objects.values("account_id").annotate(
            requests=Count("id"), errors=Count("id", filter=~Q(status__gte=200, status__lt=300) | ~Q(error_class="")),
            input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"),
            latency_ms=Sum("latency_ms")).order_by():
        out[r.pop("account_id") or 0] = r
    return out


def mixed_records(a, b) -> list:  # type: ignore[no-untyped-def]
    recs = []
    for i in range(90):
        account = (a, b, None)[i % 3]
        recs.append(record(account, ago=dt.timedelta(minutes=7 * i), status=(200, 200, 429, 200, 502)[i % 5],
                           ttfb_ms=(5, 40, 900, 25_000, 200_000)[i % 5], input_tokens=i, output_tokens=2 * i,
                           latency_ms=100 + i, error_class="upstream_timeout" if i % 11 == 0 else ""))
    return recs


def test_buckets_written_with_each_batch_sum_to_the_log(provider) -> None:  # type: ignore[no-untyped-def]
    a, b = make_account(provider, "a"), make_account(provider, "b")
    recs = mixed_records(a, b)
    for i in range(0, len(recs), 25):  # several batches, some hitting the same buckets
        write(recs[i:i + 25])
    buckets = bucket_totals()
    logged = log_totals()
    assert set(buckets) == {a.pk, b.pk, 0}
    for account_id, expected in logged.items():
        got = buckets[account_id]
        assert {k: got[k] for k in expected} == expected
    ttfbs = [r.ttfb_ms for r in recs if r.ttfb_ms is not None]
    assert sum(sum(v[f] for f in histogram.FIELDS) for v in buckets.values()) == len(ttfbs)


def test_rebuild_from_the_log_gives_the_buckets_the_writer_kept(provider) -> None:  # type: ignore[no-untyped-def]
    a, b = make_account(provider, "a"), make_account(provider, "b")
    write(mixed_records(a, b))
    kept = sorted(UsageBucket.objects.values_list("start", "account_id", "requests", "errors", "ttfb_3"))
    assert rollup.rebuild(RequestLog) == 90
    assert sorted(UsageBucket.objects.values_list("start", "account_id", "requests", "errors", "ttfb_3")) == kept


def test_rows_fall_in_the_five_minute_bucket_of_their_start(provider) -> None:  # type: ignore[no-untyped-def]
    a = make_account(provider, "a")
    at = dt.datetime(2026, 1, 2, 3, 9, 59, tzinfo=dt.timezone.utc)
    write([record(a, created_at=at), record(a, created_at=at + dt.timedelta(seconds=1))])
    starts = sorted(UsageBucket.objects.values_list("start", "requests"))
    base = int(dt.datetime(2026, 1, 2, 3, 5, tzinfo=dt.timezone.utc).timestamp())
    assert starts == [(base, 1), (base + 300, 1)]
