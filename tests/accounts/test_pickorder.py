"""One written spec of the pick (accounts.pickorder), several implementations: they choose alike.

Hypothesis generates pool states (statuses, cool-downs over or not, balances, last-used times,
tiers, weights, virtual times, a preferred account, exclusions, strategy). For each, the memory pool
(SQLite's) picks, and so does the database: on PostgreSQL the PostgreSQL pool itself (its
``accounts_pick_account`` function); on SQLite the spec's own SQL fragments, run by SQLite. All must
choose the same account, or none; under ``weighted`` both advance its virtual time alike.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounts import pickorder
from accounts.memorypool import MemoryPool
from accounts.models import Account, Provider
from accounts.pgpool import PgPool

pytestmark = pytest.mark.django_db(transaction=True)

account_state = st.fixed_dictionaries({
    "status": st.sampled_from([pickorder.ACTIVE, pickorder.COOLING, pickorder.DISABLED]),
    # minutes from now; None: no cool-down end
    "cooldown": st.one_of(st.none(), st.integers(-120, 120).filter(lambda m: m != 0)),
    "balance": st.one_of(st.none(), st.sampled_from([Decimal("0"), Decimal("1.5"), Decimal("50"), Decimal("-2")])),
    # minutes ago; None: never used. Few values, so that ties (broken by id) happen.
    "last_used": st.one_of(st.none(), st.sampled_from([1, 5, 30, 600])),
    "tier": st.sampled_from([1, 2, 3]),
    "weight": st.sampled_from([0, 1, 2, 3]),
    "due": st.one_of(st.none(), st.sampled_from([0.0, 0.5, 1.0 / 3, 2.25, 7.0, -1.0])),
})
pool_state = st.fixed_dictionaries({
    "accounts": st.lists(account_state, min_size=0, max_size=7),
    "exclude": st.lists(st.integers(0, 6), max_size=3),
    "strategy": st.sampled_from(list(pickorder.STRATEGIES)),
    "prefer": st.one_of(st.none(), st.integers(0, 6)),
})


def build(state: dict[str, Any], provider: Provider, now: dt.datetime) -> list[int]:
    Account.objects.filter(provider=provider).delete()
    made = []
    for i, a in enumerate(state["accounts"]):
        account = Account(
            provider=provider, label=f"a{i}", status=a["status"], balance=a["balance"],
            cooldown_until=now + dt.timedelta(minutes=a["cooldown"]) if a["cooldown"] is not None else None,
            last_used_at=now - dt.timedelta(minutes=a["last_used"]) if a["last_used"] is not None else None,
            tier=a["tier"], weight=a["weight"], pick_due=a["due"])
        account.set_secret(f"sk-spec-{i}")
        made.append(account)
    Account.objects.bulk_create(made)
    return [a.pk for a in Account.objects.filter(provider=provider).order_by("id")]


def memory_pick(provider: Provider, exclude: list[int], strategy: str, prefer: int | None) -> int | None:
    async def pick() -> int | None:
        pool = MemoryPool(ttl=0)
        account = await pool.pick(provider.pk, exclude, strategy, prefer)
        await pool.aclose()  # its stamps (and virtual time) written, as the database's pick writes them
        return account.pk if account else None

    return asyncio.run(pick())


def postgres_pick(provider: Provider, exclude: list[int], strategy: str, prefer: int | None) -> int | None:
    pool = PgPool(connections=1)

    async def pick() -> int | None:
        try:
            account = await pool.pick(provider.pk, exclude, strategy, prefer)
            return account.pk if account else None
        finally:
            await pool.aclose()

    return asyncio.run(pick())


def spec_sql_pick(provider: Provider, exclude: list[int], strategy: str, now: dt.datetime,
                  prefer: int | None) -> int | None:
    """The spec's SQL as SQLite runs it (the same fragments make up the PostgreSQL function)."""

    ops = connection.ops
    not_excluded = f"AND c.id NOT IN ({', '.join(['%s'] * len(exclude))})" if exclude else ""
    sql = (f"SELECT c.id FROM accounts_account AS c WHERE c.provider_id = %s "
           f"AND {pickorder.USABLE_SQL.format(now='%s')} {not_excluded} "
           f"ORDER BY {pickorder.ORDER_SQL.format(strategy='%s', prefer='%s')} LIMIT 1")
    with transaction.atomic(), connection.cursor() as cursor:
        # ORDER_SQL names the preferred account once, then the strategy four times.
        cursor.execute(sql, [provider.pk, ops.adapt_datetimefield_value(now), *exclude, prefer, *[strategy] * 4])
        row = cursor.fetchone()
    return int(row[0]) if row else None


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(state=pool_state)
def test_every_implementation_picks_what_the_spec_picks(state: dict[str, Any]) -> None:
    provider, _ = Provider.objects.get_or_create(name="spec", defaults={
        "protocol": "openai_chat", "base_url": "http://127.0.0.1:9/v1"})
    now = timezone.now()
    ids = build(state, provider, now)
    exclude = sorted({ids[i] for i in state["exclude"] if i < len(ids)})
    strategy = state["strategy"]
    prefer = ids[state["prefer"]] if state["prefer"] is not None and state["prefer"] < len(ids) else None

    # The spec in Python, over the state as generated.
    accounts = list(Account.objects.filter(provider=provider))
    candidates = [(pickorder.sort_key(strategy, a.balance, a.last_used_at, a.pk, prefer=prefer, tier=a.tier,
                                      weight=a.weight, due=a.pick_due), a.pk)
                  for a in accounts if a.pk not in exclude and pickorder.usable(a.status, a.cooldown_until, now)]
    expected = min(candidates)[1] if candidates else None
    lead = max((a.pick_due for a in accounts if a.pick_due is not None), default=None)
    expected_due = None
    if expected is not None:
        chosen = next(a for a in accounts if a.pk == expected)
        expected_due = (pickorder.next_due(chosen.pick_due, lead, chosen.weight) if strategy == pickorder.WEIGHTED
                        else chosen.pick_due)

    if connection.vendor == "postgresql":
        by_database = postgres_pick(provider, exclude, strategy, prefer)
        due_by_database = Account.objects.get(pk=by_database).pick_due if by_database is not None else None
        assert due_by_database == expected_due
    else:
        by_database = spec_sql_pick(provider, exclude, strategy, now, prefer)
    build(state, provider, now)  # a pick stamps its account (and may end its cool-down): the same state again
    ids_again = [a.pk for a in Account.objects.filter(provider=provider).order_by("id")]
    remap = dict(zip(ids_again, ids))
    back = {v: k for k, v in remap.items()}
    exclude_again = [back[i] for i in exclude]
    by_memory = memory_pick(provider, exclude_again, strategy, back[prefer] if prefer is not None else None)
    assert by_database == expected
    assert (remap[by_memory] if by_memory is not None else None) == expected
    if by_memory is not None:
        assert Account.objects.get(pk=by_memory).pick_due == expected_due


def test_weighted_picks_in_proportion_to_weight() -> None:
    """Weights 1, 2 and 3 over 60 picks: 10, 20 and 30 (the spec's virtual time, in the memory pool)."""

    provider = Provider.objects.create(name="w", protocol="openai_chat", base_url="http://127.0.0.1:9/v1",
                                       selection=pickorder.WEIGHTED)
    made = []
    for i, weight in enumerate((1, 2, 3)):
        account = Account(provider=provider, label=f"w{i}", weight=weight)
        account.set_secret(f"sk-weight-{i}")
        account.save()
        made.append(account.pk)

    async def picks() -> list[int]:
        pool = MemoryPool(ttl=60)
        out = [(await pool.pick(provider.pk, [], pickorder.WEIGHTED)).pk for _ in range(60)]  # type: ignore[union-attr]
        await pool.aclose()
        return out

    chosen = asyncio.run(picks())
    assert [chosen.count(pk) for pk in made] == [10, 20, 30]


def test_priority_fills_the_first_tier_and_spills_when_it_has_nothing_usable() -> None:
    provider = Provider.objects.create(name="t", protocol="openai_chat", base_url="http://127.0.0.1:9/v1",
                                       selection=pickorder.PRIORITY)
    made = {}
    for label, tier in (("second-a", 2), ("first-a", 1), ("first-b", 1)):
        account = Account(provider=provider, label=label, tier=tier)
        account.set_secret(f"sk-tier-{label}")
        account.save()
        made[label] = account.pk

    async def picks(exclude: list[int]) -> list[int]:
        pool = MemoryPool(ttl=0)
        out = [(await pool.pick(provider.pk, exclude, pickorder.PRIORITY)).pk for _ in range(4)]  # type: ignore[union-attr]
        await pool.aclose()
        return out

    assert set(asyncio.run(picks([]))) == {made["first-a"], made["first-b"]}
    assert set(asyncio.run(picks([made["first-a"], made["first-b"]]))) == {made["second-a"]}
