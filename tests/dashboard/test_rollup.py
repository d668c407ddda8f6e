"""The usage buckets agree with the request log they sum, however the rows arrive: each account's
figures are a recount of its uses in the log's attempt traces, the deployment's a count of its rows."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db.models import Sum

from accounts.models import RequestLog
from dashboard import histogram, rollup, stats
from dashboard.models import UsageBucket
from gateway.log.writer import Attempt
from tests.dashboard.conftest import make_account, record, write

pytestmark = pytest.mark.django_db


def bucket_totals() -> dict[int, dict[str, int]]:
    rows = UsageBucket.objects.values("account_id").annotate(
        requests=Sum("requests"), errors=Sum("errors"), input_tokens=Sum("input_tokens"),
        output_tokens=Sum("output_tokens"), latency_ms=Sum("latency_ms"),
        **{f: Sum(f) for f in histogram.FIELDS}).order_by()
    return {r.pop("account_id"): r for r in rows}


def log_totals() -> dict[int, dict[str, int]]:
    """Each account's figures counted again from the log's rows and their attempt traces: every attempt
    a request of its account, an error unless it answered a request that went well; the tokens and the
    latency go to the account that answered last."""

    out: dict[int, dict[str, int]] = {}
    for row in RequestLog.objects.all():
        went_well = 200 <= row.status < 300 and not row.error_class
        trace = [(a["account_id"], a["verdict"]) for a in row.attempts] or [(row.account_id or 0, "ok")]
        for i, (account_id, verdict) in enumerate(trace):
            last = i == len(trace) - 1
            t = out.setdefault(account_id, dict.fromkeys(
                ("requests", "errors", "input_tokens", "output_tokens", "latency_ms"), 0))
            t["requests"] += 1
            t["errors"] += not (last and verdict == "ok" and went_well)
            if last:
                t["input_tokens"] += row.input_tokens
                t["output_tokens"] += row.output_tokens
                t["latency_ms"] += row.latency_ms
    return out


def tried(*accounts: object, status: int = 200, **kw: object) -> object:
    """A request that failed on each account but the last, which answered ``status``."""

    *failed, last = accounts
    attempts = [Attempt(a.pk, a.label, 429, "disable", 10) for a in failed]  # type: ignore[attr-defined]
    attempts.append(Attempt(last.pk, last.label, status, "ok" if status < 400 else "return", 20))  # type: ignore[attr-defined]
    return record(last, status=status, attempts=attempts, **kw)  # type: ignore[arg-type]


def mixed_records(a, b) -> list:  # type: ignore[no-untyped-def]
    recs = []
    for i in range(90):
        account = (a, b, None)[i % 3]
        recs.append(record(account, ago=dt.timedelta(minutes=7 * i), status=(200, 200, 429, 200, 502)[i % 5],
                           ttfb_ms=(5, 40, 900, 25_000, 200_000)[i % 5], input_tokens=i, output_tokens=2 * i,
                           latency_ms=100 + i, error_class="upstream_timeout" if i % 11 == 0 else ""))
    for i in range(30):  # retried on another account, some of them failing there too
        order = (a, b) if i % 2 else (b, a, b)
        recs.append(tried(*order, status=(200, 200, 500)[i % 3], ago=dt.timedelta(minutes=11 * i),
                          input_tokens=i, output_tokens=i, latency_ms=300 + i))
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
    assert rollup.rebuild(RequestLog) == 120
    assert sorted(UsageBucket.objects.values_list("start", "account_id", "requests", "errors", "ttfb_3")) == kept


def test_rows_fall_in_the_five_minute_bucket_of_their_start(provider) -> None:  # type: ignore[no-untyped-def]
    a = make_account(provider, "a")
    at = dt.datetime(2026, 1, 2, 3, 9, 59, tzinfo=dt.timezone.utc)
    write([record(a, created_at=at), record(a, created_at=at + dt.timedelta(seconds=1))])
    starts = sorted(UsageBucket.objects.values_list("start", "requests"))
    base = int(dt.datetime(2026, 1, 2, 3, 5, tzinfo=dt.timezone.utc).timestamp())
    assert starts == [(base, 1), (base + 300, 1)]


def test_the_deployments_figures_count_each_request_once_however_many_accounts_it_tried(provider) -> None:  # type: ignore[no-untyped-def]
    a, b = make_account(provider, "a"), make_account(provider, "b")
    write([tried(a, b), tried(a, b, a, status=502), record(b), record(None, status=401)])
    window = stats.WINDOWS["1h"]
    deployment = stats.totals(window)
    assert (deployment.requests, deployment.errors) == (4, 2)
    assert sum(p["requests"] for p in stats.series(window)) == 4
    assert sum(p["errors"] for p in stats.series(window)) == 2
    per_account = stats.per_account(window)
    assert (per_account[a.pk].requests, per_account[a.pk].errors) == (3, 3)
    assert (per_account[b.pk].requests, per_account[b.pk].errors) == (3, 1)
    assert (stats.totals(window, a.pk).requests, stats.totals(window, a.pk).errors) == (3, 3)
