"""Usage and spend are kept in five-minute, hour and day buckets; every window's figures, read from the
coarsest buckets that fit, are what the request log's own rows add up to, to the row."""

from __future__ import annotations

import datetime as dt
import importlib
import random
from collections import Counter, defaultdict
from decimal import Decimal
from typing import Any

import pytest
from django.apps import apps

from accounts.models import Provider, RequestLog
from dashboard import histogram, rollup, spend, spendstats, stats
from dashboard.buckets import Tier, pieces
from tests.dashboard.conftest import make_account, make_key, record, write

TIERS = (Tier(300, None), Tier(3600, None), Tier(86400, None))


@pytest.mark.parametrize("seed", range(20))
def test_pieces_cover_a_window_exactly_with_whole_buckets_no_wider_than_the_step(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(200):
        now = 1_700_000_000 + rng.randrange(10 * 86400)
        lo = now - rng.choice((3600, 86400, 7 * 86400, rng.randrange(1, 40 * 86400)))
        lo -= lo % 300
        step = rng.choice((None, 300, 3600, 86400))
        got = pieces(TIERS, lo, now, step)
        assert got[0][1] == lo
        assert got[-1][2] is None and got[-1][1] <= now
        for (tier, first, until), nxt in zip(got, [*got[1:], None]):
            assert first % tier.seconds == 0
            assert step is None or step % tier.seconds == 0
            if nxt is not None:
                assert until == nxt[1] and until > first and until % tier.seconds == 0
                assert nxt[0].seconds > tier.seconds
        # The coarsest allowed tier reads everything but the ragged start: a week is at most a day's worth
        # of finer buckets plus its days.
        widest = max(t.seconds for t in TIERS if step is None or step % t.seconds == 0)
        finer = sum(((until or now) - first) // tier.seconds for tier, first, until in got if tier.seconds < widest)
        assert finer <= 12 + 24


def _went_well(row: RequestLog) -> bool:
    return 200 <= row.status < 300 and not row.error_class


# Ages kept clear of every window's edge (its start moves with the clock, five minutes at a time).
EDGES = (3600, 86400, 7 * 86400)


def _age(rng: random.Random, i: int) -> float:
    while True:
        age = rng.uniform(0, 3000 if i % 10 == 0 else 8.5 * 86400)  # a tenth in the last hour
        if all(not (edge - 900 < age < edge + 900) for edge in EDGES):
            return age


@pytest.fixture
def spread(provider: Provider) -> dict[str, Any]:
    """400 requests at random times over eight and a half days (a tenth in the last hour), to two accounts and none, two keys, two models."""

    provider.prices = {"gpt-*": {"input": 2, "output": 10, "cache_read": 0.2, "cache_write": 2.5, "cache_write_1h": 4}}
    provider.save()
    rng = random.Random(5)
    accounts = [make_account(provider, "a"), make_account(provider, "b"), None]
    keys = [make_key("team-a"), make_key("team-b")]
    now = dt.datetime.now(dt.timezone.utc)
    records = []
    for i in range(400):
        status = rng.choice((200, 200, 200, 429, 502))
        key = keys[i % 2]
        inp = rng.randrange(1, 500)
        cached = rng.randrange(0, inp + 1)
        written = rng.randrange(0, inp - cached + 1)
        records.append(record(rng.choice(accounts), status=status, created_at=now - dt.timedelta(seconds=_age(rng, i)),
                              ttfb_ms=rng.choice((5, 80, 900, 30_000)), input_tokens=inp, cached_tokens=cached,
                              cache_write_tokens=written, cache_write_1h_tokens=rng.randrange(0, written + 1),
                              output_tokens=rng.randrange(0, 200), latency_ms=rng.randrange(10, 2000),
                              model_requested=rng.choice(("gpt-small", "gpt-large")), client_key_id=key.pk,
                              client_key_name=key.name))
    for i in range(0, len(records), 37):
        write(records[i:i + 37])
    return {"accounts": [a for a in accounts if a is not None], "keys": keys}


def _logged(window: stats.Window) -> list[RequestLog]:
    lo = stats.window_start(window)
    return [r for r in RequestLog.objects.all() if r.created_at.timestamp() >= lo]


@pytest.mark.django_db
@pytest.mark.parametrize("window_key", list(stats.WINDOWS))
def test_every_window_reads_from_the_tiers_what_the_log_holds(spread: dict[str, Any], window_key: str) -> None:
    window = stats.WINDOWS[window_key]
    rows = _logged(window)
    assert rows, "the window holds requests"

    total = stats.totals(window)
    assert (total.requests, total.errors) == (len(rows), sum(not _went_well(r) for r in rows))
    assert (total.input_tokens, total.output_tokens, total.latency_ms) == (
        sum(r.input_tokens for r in rows), sum(r.output_tokens for r in rows), sum(r.latency_ms for r in rows))
    assert (total.cached_tokens, total.cache_write_tokens) == (
        sum(r.cached_tokens for r in rows), sum(r.cache_write_tokens for r in rows))
    assert total.cache_hit_rate == total.cached_tokens / total.input_tokens
    assert sum(total.ttfb) == sum(r.ttfb_ms is not None for r in rows)
    assert total.ttfb[histogram.slot(30_000)] == sum(r.ttfb_ms == 30_000 for r in rows)

    by_account = Counter(r.account_id or 0 for r in rows)
    got = stats.per_account(window)
    assert {a: t.requests for a, t in got.items()} == dict(by_account)
    for account in spread["accounts"]:
        assert stats.totals(window, account.pk).output_tokens == sum(
            r.output_tokens for r in rows if r.account_id == account.pk)

    per_step: dict[int, int] = Counter(int(r.created_at.timestamp()) // window.step * window.step for r in rows)
    points = stats.series(window)
    assert {p["t"]: p["requests"] for p in points if p["requests"]} == dict(per_step)
    assert [p["t"] for p in points] == sorted(p["t"] for p in points)
    assert len(points) in (window.seconds // window.step + 1, window.seconds // window.step + 2)

    sparks = stats.per_account_series(window, "requests", [a.pk for a in spread["accounts"]])
    for account in spread["accounts"]:
        mine = Counter(int(r.created_at.timestamp()) // window.step * window.step
                       for r in rows if r.account_id == account.pk)
        assert {t: n for t, n in zip((p["t"] for p in points), sparks.get(account.pk, [])) if n} == dict(mine)


@pytest.mark.django_db
@pytest.mark.parametrize("window_key", list(stats.WINDOWS))
def test_spend_per_key_model_and_step_is_the_logs_cost_in_every_window(spread: dict[str, Any],
                                                                      window_key: str) -> None:
    window = stats.WINDOWS[window_key]
    rows = _logged(window)
    cost: dict[Any, Decimal] = defaultdict(Decimal)
    for r in rows:
        cost[r.model_requested] += r.cost or Decimal(0)
    assert sum(cost.values()) > 0
    by_model = spendstats.by(window, "model")
    assert {m: s.cost for m, s in by_model.items()} == pytest.approx(dict(cost), abs=Decimal("0.000001"))
    assert {m: s.requests for m, s in by_model.items()} == dict(Counter(r.model_requested for r in rows))
    for m, spent in by_model.items():
        assert (spent.cached_tokens, spent.cache_write_tokens) == (
            sum(r.cached_tokens for r in rows if r.model_requested == m),
            sum(r.cache_write_tokens for r in rows if r.model_requested == m))
    assert spendstats.total(window).requests == len(rows)

    key = spread["keys"][1]
    mine = [r for r in rows if r.client_key_id == key.pk]
    points = spendstats.series(window, key.pk)
    per_step = Counter(int(r.created_at.timestamp()) // window.step * window.step for r in mine)
    assert {p["t"]: p["requests"] for p in points if p["requests"]} == dict(per_step)
    assert sum(p["tokens"] for p in points) == sum(r.input_tokens + r.output_tokens for r in mine)


@pytest.mark.django_db
def test_the_hour_and_day_buckets_sum_the_five_minute_ones(spread: dict[str, Any]) -> None:
    for tiers, columns in ((rollup.TIERS, ("requests", "errors", "retried", "latency_ms", "ttfb_4", "cache_write_tokens")),
                           (spend.TIERS, ("requests", "input_tokens", "cost_nanos", "cached_tokens",
                                          "cache_write_tokens"))):
        fine = tiers[0].model.objects.all()
        for tier in tiers[1:]:
            coarse = tier.model.objects.all()
            assert all(start % tier.seconds == 0 for start in coarse.values_list("start", flat=True))
            for column in columns:
                assert sum(coarse.values_list(column, flat=True)) == sum(fine.values_list(column, flat=True))
            assert coarse.count() < fine.count()


@pytest.mark.django_db
def test_the_migration_fills_the_hour_and_day_buckets_from_the_five_minute_ones(spread: dict[str, Any]) -> None:
    kept = {t.model: sorted(t.model.objects.values_list()) for t in (*rollup.TIERS[1:], *spend.TIERS[1:])}
    strip = [sorted(row[1:] for row in rows) for rows in kept.values()]  # without the ids, which differ
    for model in kept:
        model.objects.all().delete()
    migration = importlib.import_module("dashboard.migrations.0004_hour_and_day_buckets")
    migration.backfill(apps, None)
    assert [sorted(row[1:] for row in model.objects.values_list()) for model in kept] == strip


@pytest.mark.django_db
def test_a_rebuild_since_a_time_starts_every_tier_at_a_whole_day(spread: dict[str, Any]) -> None:
    kept = {t.model: sorted(row[1:] for row in t.model.objects.values_list()) for t in rollup.TIERS}
    since = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=3, hours=5)
    rollup.rebuild(RequestLog, since=since)
    assert {t.model: sorted(row[1:] for row in t.model.objects.values_list()) for t in rollup.TIERS} == kept
