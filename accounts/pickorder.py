"""The pool's pick, written once: which accounts are usable, and which of them goes first.

**Usable**: an account of the provider, not excluded (already tried by this
request), whose status is ``active``, or ``cooling`` with its cool-down over
(``cooldown_until <= now``). A cooling account whose cool-down is over is picked
as it is; the picker then makes it active and closes its disable event.

**Order**, first to last:

1. with the ``balance`` strategy only: the highest balance first, accounts
   without a balance after all that have one;
2. the least recently used first, accounts never used before all others;
3. the lowest id.

The picked account's last-used time becomes the pick's time, so the next pick
of the same state chooses another one (least-recently-used rotation).

Two pools implement this: :mod:`accounts.memorypool` in Python (SQLite: one
process owns the rotation) with :func:`usable` and :func:`sort_key`, and
:mod:`accounts.pgpool` in one round trip to PostgreSQL with :data:`PG_FUNCTION`,
whose WHERE and ORDER BY are :data:`USABLE_SQL` and :data:`ORDER_SQL`.
``tests/accounts/test_pickorder.py`` generates pool states and checks that both
choose the same account for each.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

ACTIVE, COOLING, DISABLED = "active", "cooling", "disabled"
STRATEGIES = ("lru", "balance")

_NEVER = dt.datetime.min.replace(tzinfo=dt.timezone.utc)


def usable(status: str, cooldown_until: dt.datetime | None, now: dt.datetime) -> bool:
    return status == ACTIVE or (status == COOLING and cooldown_until is not None and cooldown_until <= now)


def sort_key(strategy: str, balance: Decimal | None, last_used: dt.datetime | None, pk: int) -> tuple[Any, ...]:
    """Ascending: the smallest key is picked."""

    by_balance: tuple[Any, ...] = ()
    if strategy == "balance":
        by_balance = (balance is None, -balance if balance is not None else Decimal(0))
    return (*by_balance, last_used is not None, last_used or _NEVER, pk)


# The same two rules over the table aliased ``c``; %(now)s and %(strategy)s are the pick's parameters.
USABLE_SQL = "(c.status = 'active' OR (c.status = 'cooling' AND c.cooldown_until <= {now}))"
ORDER_SQL = ("(CASE WHEN {strategy} = 'balance' THEN c.balance END) DESC NULLS LAST, "
             "c.last_used_at ASC NULLS FIRST, c.id ASC")

# PostgreSQL: picks of one provider run one at a time (a transaction-scoped advisory lock on the
# provider), and each pick's UPDATE takes its snapshot only once it holds the lock, so it sees every
# earlier pick: least-recently-used stays exact across any number of gateway processes. The lock
# lives only inside the server (one statement, committed at once), never across a client round
# trip. The commit is asynchronous: a crash can lose only recent last-used stamps. SKIP LOCKED was
# tried first and measured unfair under contention (a pick stalled while holding a row lock made
# every other pick pass that account over).
PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION accounts_pick_account(
    p_provider bigint, p_exclude bigint[], p_strategy text, p_now timestamptz
) RETURNS SETOF accounts_account LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock('accounts_account'::regclass::oid::integer, p_provider::integer);
    PERFORM set_config('synchronous_commit', 'off', true);
    RETURN QUERY
    UPDATE accounts_account AS a SET last_used_at = clock_timestamp()
    WHERE a.id = (
        SELECT c.id FROM accounts_account AS c
        WHERE c.provider_id = p_provider
          AND {USABLE_SQL.format(now="p_now")}
          AND NOT (c.id = ANY(p_exclude))
        ORDER BY {ORDER_SQL.format(strategy="p_strategy")}
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
