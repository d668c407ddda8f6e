"""PostgreSQL only: ``accounts_pick_account``, the pool's selection in one round trip.

Picks of one provider run one at a time (a transaction-scoped advisory lock on
the provider), and each pick's UPDATE takes its snapshot only once it holds the
lock, so it sees every earlier pick: least-recently-used stays exact across any
number of gateway processes. The lock lives only inside the server (one
statement, committed at once), never across a client round trip, so a busy
gateway process cannot hold up the others. The commit is asynchronous: a crash
can lose only recent last-used stamps.

A cooled-down account is returned still marked ``cooling``; the caller makes
it active and closes its DisableEvent (with the broadcast) in Django.
"""

from django.db import migrations

CREATE = """
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
          AND (c.status = 'active' OR (c.status = 'cooling' AND c.cooldown_until <= p_now))
          AND NOT (c.id = ANY(p_exclude))
        ORDER BY (CASE WHEN p_strategy = 'balance' THEN c.balance END) DESC NULLS LAST,
                 c.last_used_at ASC NULLS FIRST, c.id ASC
        LIMIT 1)
      -- re-checked if the row changed while we waited for its lock (e.g. disabled meanwhile)
      AND (a.status = 'active' OR (a.status = 'cooling' AND a.cooldown_until <= p_now))
    RETURNING a.*;
END
$$;
"""

DROP = "DROP FUNCTION IF EXISTS accounts_pick_account(bigint, bigint[], text, timestamptz);"


def create(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0002_provider_prices_auto_prefix"),
    ]

    operations = [migrations.RunPython(create, drop)]
