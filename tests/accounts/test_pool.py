"""Account selection and the pool's state changes."""

from __future__ import annotations

import datetime as dt
import threading
from collections import Counter
from decimal import Decimal

import pytest
from django.db import connection
from django.utils import timezone

from accounts import pool
from accounts.models import Account, DisableEvent, Provider

pytestmark = pytest.mark.django_db(transaction=True)


def make_pool(n: int, selection: str = "lru") -> tuple[Provider, list[Account]]:
    provider = Provider.objects.create(name="p", protocol="openai_chat", base_url="http://127.0.0.1:1/v1",
                                       selection=selection)
    accounts = []
    for i in range(n):
        a = Account(provider=provider, label=f"a{i}")
        a.set_secret(f"sk-test-secret-{i}")
        a.save()
        accounts.append(a)
    return provider, accounts


def test_lru_rotates_through_every_account() -> None:
    provider, accounts = make_pool(3)
    picked = [pool.select_account(provider.pk, [], "lru").pk for _ in range(6)]  # type: ignore[union-attr]
    assert picked[:3] == [a.pk for a in accounts]
    assert picked[3:] == picked[:3]


def test_selection_skips_tried_disabled_and_cooling_accounts() -> None:
    provider, (a0, a1, a2, a3) = make_pool(4)
    Account.objects.filter(pk=a1.pk).update(status=Account.DISABLED)
    Account.objects.filter(pk=a2.pk).update(status=Account.COOLING,
                                            cooldown_until=timezone.now() + dt.timedelta(hours=1))
    chosen = pool.select_account(provider.pk, [a0.pk], "lru")
    assert chosen is not None and chosen.pk == a3.pk
    assert pool.select_account(provider.pk, [a0.pk, a3.pk], "lru") is None


def test_balance_strategy_prefers_the_richest_account() -> None:
    provider, (a0, a1, a2) = make_pool(3, "balance")
    Account.objects.filter(pk=a0.pk).update(balance=Decimal("1"))
    Account.objects.filter(pk=a1.pk).update(balance=Decimal("50"))
    chosen = pool.select_account(provider.pk, [], "balance")
    assert chosen is not None and chosen.pk == a1.pk


def test_disabling_twice_writes_one_event_and_cooldown_end_reenables() -> None:
    provider, (a0,) = make_pool(1)
    until = timezone.now() + dt.timedelta(seconds=30)
    assert pool.disable_account(a0.pk, rule="exhausted", tier="tier3", status_code=429, excerpt="x",
                                cooldown_until=until)
    assert not pool.disable_account(a0.pk, rule="exhausted", tier="tier3", status_code=429, excerpt="x")
    assert DisableEvent.objects.count() == 1
    assert pool.select_account(provider.pk, [], "lru") is None  # still cooling
    Account.objects.filter(pk=a0.pk).update(cooldown_until=timezone.now() - dt.timedelta(seconds=1))
    chosen = pool.select_account(provider.pk, [], "lru")
    assert chosen is not None and chosen.status == Account.ACTIVE
    event = DisableEvent.objects.get()
    assert event.ended_by == "cooldown" and event.ended_at is not None


def test_account_disabled_by_hand_is_never_reenabled_automatically() -> None:
    provider, (a0,) = make_pool(1)
    pool.disable_by_hand(a0.pk)
    Account.objects.filter(pk=a0.pk).update(cooldown_until=timezone.now() - dt.timedelta(days=1))
    assert pool.select_account(provider.pk, [], "lru") is None
    assert pool.enable_account(a0.pk, how="hand")
    assert pool.select_account(provider.pk, [], "lru") is not None


def test_redact_removes_known_secrets_and_key_shaped_strings() -> None:
    text = 'Invalid key sk-live-abcdef123456 for account; header "Bearer gw-client-secret-xyz"'
    out = pool.redact(text, ["sk-live-abcdef123456"])
    assert "sk-live-abcdef123456" not in out
    assert "gw-client-secret-xyz" not in out
    assert "Invalid key" in out


def test_concurrent_picks_stay_exactly_least_recently_used() -> None:
    # Eight threads (eight database connections) picking at once, as several gateway processes do.
    provider, accounts = make_pool(5)
    picks: list[int] = []
    start = threading.Barrier(8)

    def picker() -> None:
        try:
            start.wait()
            for _ in range(25):
                account = pool.select_account(provider.pk, [], "lru")
                assert account is not None
                picks.append(account.pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=picker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(Counter(picks).values()) == [40] * 5


def test_a_pick_never_returns_an_account_disabled_meanwhile() -> None:
    provider, (a0, a1) = make_pool(2)
    pool.disable_account(a0.pk, rule="exhausted", tier="tier3", status_code=429, excerpt="")
    assert {pool.select_account(provider.pk, [], "lru").pk for _ in range(3)} == {a1.pk}  # type: ignore[union-attr]
