"""The configuration's version: what tells every gateway process that its cached copy is old.

Each change to what the gateways cache (providers, accounts, client keys, aliases, teams, users and
their sign-ins) bumps the
one :class:`~accounts.models.ConfigVersion` row *in the transaction of the change*, so whoever can
see the change can see the bump, whichever process made it (the admin, ``loadconfig``, a shell).
On PostgreSQL the bump also sends ``NOTIFY gateway_config``, which PostgreSQL delivers to the
listening gateways only if, and when, the transaction commits. After commit, the process that
made the change sends :data:`config_changed` to its own gateway at once.

Saves and deletes through the ORM bump by themselves (:func:`connect`, from the app's ``ready``);
code that writes these tables in bulk (``QuerySet.update``, ``bulk_create``) calls :func:`bump`.
Saves that only keep the books (usage counters, last-used stamps, probe results) do not bump.

Two transactions that change the same rows at once may deadlock on the version row (PostgreSQL
aborts one of them, which can be tried again): configuration is written by people and scripts, rarely
at once, and a change must never commit without its bump.
"""

from __future__ import annotations

from typing import Any

from django.db import connections, transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import Signal

CHANNEL = "gateway_config"
TABLE = "accounts_configversion"

# Sent after commit, in the process that made the change (no arguments beyond the sender).
config_changed = Signal()

# Fields whose saves are bookkeeping, not configuration: a save of only these does not bump.
BOOKKEEPING = frozenset({
    "requests", "errors", "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens",
    "last_used_at", "probe_requested_at", "probed_at", "probe_ok", "probe_summary", "retest_at",
    "retest_interval", "proxy_failed_at", "cache_write_tokens", "headroom", "pick_due", "last_login",
})


def bump(using: str = "default") -> None:
    """Bump the version in the current transaction (or at once, outside one); tell the listeners on commit."""

    conn = connections[using]
    with conn.cursor() as cursor:
        cursor.execute(f"UPDATE {TABLE} SET version = version + 1 WHERE id = 1")
        if cursor.rowcount == 0:  # a database set up without the migration's row
            cursor.execute(f"INSERT INTO {TABLE} (id, version) VALUES (1, 1)")
        if conn.vendor == "postgresql":
            # Identical notifications of one transaction are delivered once, at its commit.
            cursor.execute("SELECT pg_notify(%s, '')", [CHANNEL])
    transaction.on_commit(lambda: config_changed.send(sender=bump), using=using)


def read(using: str = "default") -> int:
    """The version as this connection sees it now."""

    with connections[using].cursor() as cursor:
        cursor.execute(f"SELECT version FROM {TABLE} WHERE id = 1")
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def _saved(sender: Any, update_fields: Any = None, using: str = "default", raw: bool = False, **kwargs: Any) -> None:
    if raw or (update_fields is not None and set(update_fields) <= BOOKKEEPING):
        return
    bump(using)


def _deleted(sender: Any, using: str = "default", **kwargs: Any) -> None:
    bump(using)


def connect() -> None:
    from django.contrib.auth import get_user_model

    from .models import Account, ApiKey, ModelAlias, Provider, Team

    # A user too: deactivating a developer ends their sign-in's bearers on every process.
    for model in (Provider, Account, ApiKey, ModelAlias, Team, get_user_model()):
        post_save.connect(_saved, sender=model, dispatch_uid=f"configversion-save-{model.__name__}")
        post_delete.connect(_deleted, sender=model, dispatch_uid=f"configversion-delete-{model.__name__}")
