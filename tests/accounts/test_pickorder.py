"""One written spec of the pick (accounts.pickorder), several implementations: they choose alike.

Hypothesis generates pool states (statuses, cool-downs over or not, balances, last-used times,
exclusions, strategy). For each, the memory pool (SQLite's) picks, and so does the database: on
PostgreSQL the PostgreSQL pool itself (its ``accounts_pick_account`` function); on SQLite the spec's
own SQL fragments, run by SQLite. All must choose the same account, or none.
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
})
pool_state = st.fixed_dictionaries({
    "accounts": st.lists(account_state, min_size=0, max_size=7),
    "exclude": st.lists(st.integers(0, 6), max_size=3),
    "strategy": st.sampled_from(list(pickorder.STRATEGIES)),
})


def build(state: dict[str, Any], provider: Provider, now: dt.datetime) -> list[int]:
    Account.objects.filter(provider=provider).delete()
    made = []
    for i, a in enumerate(state["accounts"]):
        account = Account(
            provider=provider, label=f"a{i}", status=a["status"], balance=a["balance"],
            cooldown_until=now + dt.timedelta(minutes=a["cooldown"]) if a["cooldown"] is not None else None,
            last_used_at=now - dt.timedelta(minutes=a["last_used"]) if a["last_used"] is not None else None)
        account.set_secret(f"sk-spec-{i}")
        made.append(account)
    Account.objects.bulk_create(made)
    return [a.pk for a in Account.objects.filter(provider=provider).order_by("id")]


def memory_pick(provider: Provider, exclude: list[int], strategy: str) -> int | None:
    async def pick() -> int | None:
        account = await MemoryPool(ttl=0).pick(provider.pk, exclude, strategy)
        return account.pk if account else None

    return asyncio.run(pick())


def postgres_pick(provider: Provider, exclude: list[int], strategy: str) -> int | None:
    pool = PgPool(connections=1)

    async def pick() -> int | None:
        try:
            account = await pool.pick(provider.pk, exclude, strategy)
            return account.pk if account else None
        finally:
            await pool.aclose()

    return asyncio.run(pick())


def spec_sql_pick(provider: Provider, exclude: list[int], strategy: str, now: dt.datetime) -> int | None:
    """The spec's SQL as SQLite runs it (the same fragments make up the PostgreSQL function)."""

    ops = connection.ops
    not_excluded = f"AND c.id NOT IN ({', '.join(['%s'] * len(exclude))})" if exclude else ""
    sql = (f"SELECT c.id FROM accounts_account AS c WHERE c.provider_id = %s "
           f"AND {pickorder.USABLE_SQL.format(now='%s')} {not_excluded} "
           f"ORDER BY {pickorder.ORDER_SQL.format(strategy='%s')} LIMIT 1")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, [provider.pk, ops.adapt_datetimefield_value(now), *exclude, strategy])
        row = cursor.fetchone()
    return int(row[0]) if row else None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(state=pool_state)
def test_every_implementation_picks_what_the_spec_picks(state: dict[str, Any]) -> None:
    provider, _ = Provider.objects.get_or_create(name="spec", defaults={
        "protocol": "openai_chat", "base_url": "http://127.0.0.1:9/v1"})
    now = timezone.now()
    ids = build(state, provider, now)
    exclude = sorted({ids[i] for i in state["exclude"] if i < len(ids)})
    strategy = state["strategy"]

    # The spec in Python, over the state as generated.
    candidates = [(pickorder.sort_key(strategy, a.balance, a.last_used_at, a.pk), a.pk)
                  for a in Account.objects.filter(provider=provider)
                  if a.pk not in exclude and pickorder.usable(a.status, a.cooldown_until, now)]
    expected = min(candidates)[1] if candidates else None

    if connection.vendor == "postgresql":
        by_database = postgres_pick(provider, exclude, strategy)
    else:
        by_database = spec_sql_pick(provider, exclude, strategy, now)
    build(state, provider, now)  # a pick stamps its account (and may end its cool-down): the same state again
    ids_again = [a.pk for a in Account.objects.filter(provider=provider).order_by("id")]
    remap = dict(zip(ids_again, ids))
    exclude_again = [k for k, v in remap.items() if v in exclude]
    by_memory = memory_pick(provider, exclude_again, strategy)
    assert by_database == expected
    assert (remap[by_memory] if by_memory is not None else None) == expected
