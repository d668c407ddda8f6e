from __future__ import annotations

import datetime as dt
import io

import pytest
from django.core.management import CommandError, call_command

from accounts.models import Provider, RequestLog
from dashboard import rollup, spend
from tests.dashboard.conftest import make_account, record, write

pytestmark = pytest.mark.django_db


def prune(*args: str) -> str:
    out = io.StringIO()
    call_command("prunelogs", *args, stdout=out)
    return out.getvalue()


def test_rows_and_buckets_older_than_the_retention_go_and_newer_ones_stay(provider: Provider,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gateway.management.commands.prunelogs.CHUNK", 7)  # several chunks
    a = make_account(provider, "a")
    write([record(a, ago=dt.timedelta(days=40, minutes=i)) for i in range(20)]
          + [record(a, ago=dt.timedelta(days=29, hours=23, minutes=50))]
          + [record(a, ago=dt.timedelta(days=1)) for _ in range(3)])
    assert "would delete 20 request-log rows" in prune("--days", "30", "--dry-run")
    assert RequestLog.objects.count() == 24
    assert "deleted 20 request-log rows" in prune("--days", "30")
    assert RequestLog.objects.count() == 4
    # In every tier: the buckets wholly before the cutoff went, the one that straddles it kept its count.
    for tier in (*rollup.TIERS, *spend.TIERS):
        assert sum(tier.model.objects.values_list("requests", flat=True)) == 4, tier
    assert "deleted 0 request-log rows" in prune("--days", "30")


def test_negative_days_are_refused() -> None:
    with pytest.raises(CommandError):
        prune("--days", "-1")
