"""The pool's pick, written once: which accounts are usable, and which of them goes first.

**Usable**: an account of the provider, not excluded (already tried by this
request, or unable to take it: out of quota, at its concurrency cap — the
caller's :mod:`gateway.exchange.selection` knows those), whose status is
``active``, or ``cooling`` with its cool-down over (``cooldown_until <= now``).
A cooling account whose cool-down is over is picked as it is; the picker then
makes it active and closes its disable event.

**Order**, first to last:

0. the *preferred* account (the one that served the request's session, where
   the provider's prompt cache is), when it is usable;
1. by the provider's strategy (:data:`STRATEGIES`):

   - ``lru``: nothing here (least recently used decides, below);
   - ``balance``: the highest balance first, accounts without a balance after all that have one;
   - ``priority``: the lowest ``tier`` first (fill tier 1, spill to tier 2 when tier 1 has
     nothing usable, …);
   - ``weighted``: accounts of weight 0 last; then the smallest virtual time ``pick_due``
     first, never picked before all others (weighted fair queuing, below);
2. the least recently used first, accounts never used before all others;
3. the lowest id.

The picked account's last-used time becomes the pick's time, so the next pick
of the same state chooses another one (least-recently-used rotation). Under
``weighted`` its virtual time also advances by ``1 / weight``:
``due := max(due, lead - 1) + 1 / max(weight, 1)``, where ``lead`` is the largest
``pick_due`` among the provider's accounts (0 when none has one). An account of
weight 3 advances a third as fast as one of weight 1, so it is picked three times
as often; the ``lead - 1`` floor keeps an account that sat idle (or disabled, or
new) from taking a burst of picks to catch up: it rejoins one step behind the lead.

Two pools implement this: :mod:`accounts.memorypool` in Python (SQLite: one
process owns the rotation) with :func:`usable`, :func:`sort_key` and
:func:`next_due`, and :mod:`accounts.pgpool` in one round trip to PostgreSQL with
:data:`PG_FUNCTION`, whose WHERE and ORDER BY are :data:`USABLE_SQL` and
:data:`ORDER_SQL`. ``tests/accounts/test_pickorder.py`` generates pool states and
checks that both choose the same account for each, and advance it alike.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

ACTIVE, COOLING, DISABLED = "active", "cooling", "disabled"
LRU, BALANCE, WEIGHTED, PRIORITY = "lru", "balance", "weighted", "priority"
STRATEGIES = (LRU, BALANCE, WEIGHTED, PRIORITY)
STRATEGY_NAMES = {LRU: "Least recently used", BALANCE: "Highest balance", WEIGHTED: "Weighted",
                  PRIORITY: "Priority tiers"}

_NEVER = dt.datetime.min.replace(tzinfo=dt.timezone.utc)


def usable(status: str, cooldown_until: dt.datetime | None, now: dt.datetime) -> bool:
    return status == ACTIVE or (status == COOLING and cooldown_until is not None and cooldown_until <= now)


def sort_key(strategy: str, balance: Decimal | None, last_used: dt.datetime | None, pk: int, *,
             prefer: int | None = None, tier: int = 1, weight: int = 1,
             due: float | None = None) -> tuple[Any, ...]:
    """Ascending: the smallest key is picked."""

    by_strategy: tuple[Any, ...] = ()
    if strategy == BALANCE:
        by_strategy = (balance is None, -balance if balance is not None else Decimal(0))
    elif strategy == PRIORITY:
        by_strategy = (tier,)
    elif strategy == WEIGHTED:
        by_strategy = (weight == 0, due is not None, due if due is not None else 0.0)
    return (pk != prefer, *by_strategy, last_used is not None, last_used or _NEVER, pk)


def next_due(due: float | None, lead: float | None, weight: int) -> float:
    """The picked account's virtual time under ``weighted`` (``lead``: the provider's largest, None if none)."""

    floor = (lead if lead is not None else 0.0) - 1.0
    start = floor if due is None else max(due, floor)
    return start + 1.0 / max(weight, 1)


# The same rules over the table aliased ``c``; {now}, {strategy} and {prefer} are the pick's parameters.
USABLE_SQL = "(c.status = 'active' OR (c.status = 'cooling' AND c.cooldown_until <= {now}))"
ORDER_SQL = ("(CASE WHEN c.id = {prefer} THEN 0 ELSE 1 END) ASC, "
             "(CASE WHEN {strategy} = 'balance' THEN c.balance END) DESC NULLS LAST, "
             "(CASE WHEN {strategy} = 'priority' THEN c.tier END) ASC, "
             "(CASE WHEN {strategy} = 'weighted' THEN (CASE WHEN c.weight = 0 THEN 1 ELSE 0 END) END) ASC, "
             "(CASE WHEN {strategy} = 'weighted' THEN c.pick_due END) ASC NULLS FIRST, "
             "c.last_used_at ASC NULLS FIRST, c.id ASC")

# PostgreSQL: picks of one provider run one at a time (a transaction-scoped advisory lock on the
# provider), and each pick's UPDATE takes its snapshot only once it holds the lock, so it sees every
# earlier pick: least-recently-used stays exact across any number of gateway processes. The lock
# lives only inside the server (one statement, committed at once), never across a client round
# trip. The commit is asynchronous: a crash can lose only recent last-used stamps. SKIP LOCKED was
# tried first and measured unfair under contention (a pick stalled while holding a row lock made
# every other pick pass that account over).
PG_FUNCTION = f"""
DROP FUNCTION IF EXISTS accounts_pick_account(bigint, bigint[], text, timestamptz);
CREATE OR REPLACE FUNCTION accounts_pick_account(
    p_provider bigint, p_exclude bigint[], p_strategy text, p_now timestamptz, p_prefer bigint
) RETURNS SETOF accounts_account LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock('accounts_account'::regclass::oid::integer, p_provider::integer);
    PERFORM set_config('synchronous_commit', 'off', true);
    RETURN QUERY
    UPDATE accounts_account AS a SET last_used_at = clock_timestamp(),
        pick_due = CASE WHEN p_strategy = 'weighted' THEN
            greatest(a.pick_due, coalesce((SELECT max(d.pick_due) FROM accounts_account AS d
                                           WHERE d.provider_id = p_provider), 0.0::float8) - 1.0::float8)
            + 1.0::float8 / greatest(a.weight, 1) ELSE a.pick_due END
    WHERE a.id = (
        SELECT c.id FROM accounts_account AS c
        WHERE c.provider_id = p_provider
          AND {USABLE_SQL.format(now="p_now")}
          AND NOT (c.id = ANY(p_exclude))
        ORDER BY {ORDER_SQL.format(strategy="p_strategy", prefer="p_prefer")}
        LIMIT 1)
      -- re-checked if the row changed while we waited for its lock (e.g. disabled meanwhile)
      AND {USABLE_SQL.format(now="p_now").replace("c.", "a.")}
    RETURNING a.*;
END
$$;
"""

# Whether anything is usable at all (an empty pick can also mean: the chosen account was
# disabled while the pick waited for it).
PG_ANY_USABLE = f"""
SELECT EXISTS (SELECT 1 FROM accounts_account AS c
               WHERE c.provider_id = %s AND NOT (c.id = ANY(%s::bigint[])) AND {USABLE_SQL.format(now="%s")})
"""
