"""Disable and re-enable: the audit row is written with the change and the broadcast leaves only after commit."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from accounts import events, pool
from accounts.models import Account, DisableEvent, Provider
from gateway.background.probe import ProbeOutcome
from gateway.background.prober import record
from tests.accounts.pools import new_pool, picks

pytestmark = pytest.mark.django_db(transaction=True)  # real commits, so on_commit callbacks really run


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    sent: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(events, "publish", lambda kind, payload: sent.append((kind, payload)))
    return sent


def make_account(label: str = "a") -> Account:
    provider, _ = Provider.objects.get_or_create(name="p", defaults={"protocol": "openai_chat",
                                                                     "base_url": "http://127.0.0.1:9/v1"})
    account = Account(provider=provider, label=label)
    account.set_secret(f"sk-events-{label}-0000")
    account.save()
    return account


def disable(account: Account, **kw: Any) -> bool:
    return pool.disable_account(account.pk, rule="exhausted", tier="tier3_account_exhausted", status_code=429,
                                excerpt="rate limited", **kw)


def test_disable_broadcasts_only_after_the_transaction_commits(published: list[Any]) -> None:
    account = make_account()
    with transaction.atomic():
        assert disable(account)
        assert DisableEvent.objects.filter(account=account).count() == 1  # written with the change...
        assert published == []  # ...but nobody has been told yet
    event = DisableEvent.objects.get(account=account)
    assert published == [("account.disabled", {
        "account_id": account.pk, "event_id": event.pk, "tier": "tier3_account_exhausted", "rule": "exhausted",
        "status_code": 429, "cooldown_until": None})]


def test_a_rolled_back_disable_leaves_no_event_and_sends_nothing(published: list[Any]) -> None:
    account = make_account()
    with pytest.raises(RuntimeError), transaction.atomic():
        disable(account)
        raise RuntimeError("the caller's transaction fails")
    account.refresh_from_db()
    assert account.status == Account.ACTIVE and not DisableEvent.objects.exists() and published == []


def test_concurrent_failures_of_one_account_write_one_event_and_one_broadcast(published: list[Any]) -> None:
    account = make_account()
    results: list[bool] = []
    start = threading.Barrier(6)

    def fail() -> None:
        try:
            start.wait()
            results.append(disable(account))
        finally:
            connection.close()

    threads = [threading.Thread(target=fail) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(results) == [False] * 5 + [True]
    assert DisableEvent.objects.filter(account=account).count() == 1
    assert [kind for kind, _ in published] == ["account.disabled"]


def test_reenabling_by_hand_closes_the_event_and_broadcasts_after_commit(published: list[Any]) -> None:
    account = make_account()
    disable(account)
    published.clear()
    with transaction.atomic():
        assert pool.enable_account(account.pk, how="hand")
        assert published == []
    event = DisableEvent.objects.get()
    assert event.ended_by == "hand" and event.ended_at is not None
    assert published == [("account.enabled", {"account_id": account.pk, "how": "hand"})]
    assert not pool.enable_account(account.pk, how="hand")  # already active: no second broadcast
    assert len(published) == 1


def test_the_end_of_a_cooldown_closes_the_event_when_the_account_is_next_picked(published: list[Any]) -> None:
    account = make_account()
    disable(account, cooldown_until=timezone.now() + dt.timedelta(seconds=30))
    published.clear()
    assert picks(new_pool("memory"), account.provider_id, 1) == [None]
    Account.objects.filter(pk=account.pk).update(cooldown_until=timezone.now() - dt.timedelta(seconds=1))
    assert picks(new_pool("memory"), account.provider_id, 1) == [account.pk]
    assert DisableEvent.objects.get().ended_by == "cooldown"
    assert published == [("account.enabled", {"account_id": account.pk, "how": "cooldown"})]


def test_a_successful_probe_closes_the_event_as_ended_by_probe(published: list[Any]) -> None:
    account = make_account()
    disable(account)
    outcome = record(account.pk, ProbeOutcome(True, 200, "OK"))
    assert outcome.summary == "OK — account re-enabled"
    assert DisableEvent.objects.get().ended_by == "probe"
    assert published[-1] == ("account.enabled", {"account_id": account.pk, "how": "probe"})


def test_nothing_automatic_reenables_an_account_disabled_by_hand(published: list[Any]) -> None:
    account = make_account()
    assert pool.disable_by_hand(account.pk)
    assert not pool.disable_by_hand(account.pk)
    assert [kind for kind, _ in published] == ["account.disabled"]
    for how in ("cooldown", "probe"):
        assert not pool.enable_account(account.pk, how=how)
    account.refresh_from_db()
    assert account.status == Account.DISABLED
    assert DisableEvent.objects.get().ended_at is None
    assert [kind for kind, _ in published] == ["account.disabled"]


def test_disabling_by_hand_keeps_the_pools_own_event_open(published: list[Any]) -> None:
    account = make_account()
    disable(account)
    pool.disable_by_hand(account.pk)
    assert sorted(DisableEvent.objects.filter(ended_at__isnull=True).values_list("tier", flat=True)) == [
        "manual", "tier3_account_exhausted"]
    pool.enable_account(account.pk, how="hand")
    assert set(DisableEvent.objects.values_list("ended_by", flat=True)) == {"hand"}
