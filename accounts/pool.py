"""Account selection and the state changes of the pool.

Selection is atomic across gateway processes. On PostgreSQL one round trip
(the ``accounts_pick_account`` function, migration 0003) serialises the picks
of a provider and stamps the chosen account, so LRU stays exact however many
processes pick at once; SKIP LOCKED was tried first and measured unfair under
contention (a pick stalled while holding a row lock makes every other pick pass
that account over). A SQLite database serves one gateway process, whose
requests pick in memory (:mod:`accounts.localpool`); ``select_account`` there
is one UPDATE … RETURNING under a process lock. Each state change writes its
audit row, tells the in-memory pool and broadcasts after commit.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
from collections.abc import Iterable

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from . import events
from .localpool import local_pool
from .models import Account, DisableEvent
from .pgpick import picker

log = logging.getLogger(__name__)
_SQLITE = settings.DATABASES["default"]["ENGINE"].endswith("sqlite3")
_POSTGRES = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
_sqlite_lock = threading.Lock()  # SQLite serves one gateway process: a process lock orders its picks

EXCERPT_LIMIT = 500
_SECRETISH = re.compile(r"(sk-[A-Za-z0-9_\-]{4,}|gw-[A-Za-z0-9_\-]{4,}|Bearer\s+\S+|key[\"'=:\s]+[A-Za-z0-9_\-]{16,})")


def redact(text: str, secrets: Iterable[str] = (), limit: int = EXCERPT_LIMIT) -> str:
    """An excerpt safe to store and show: known secrets and anything key-shaped removed."""

    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    text = _SECRETISH.sub("[redacted]", text)
    return text[:limit]


async def pick(provider_id: int, exclude: list[int], strategy: str) -> Account | None:
    """The request path's pick: in memory on SQLite (accounts.localpool), on the event loop on
    PostgreSQL (accounts.pgpick), else through Django in a worker thread."""

    if _SQLITE:
        return await local_pool.select(provider_id, exclude, strategy)
    if _POSTGRES:
        now = timezone.now()
        try:
            account = await picker.pick(provider_id, exclude, strategy, now)
        except Exception:  # noqa: BLE001 - the Django connection path below is the fallback
            log.warning("pick on the event loop failed; picking through Django", exc_info=True)
        else:
            if account is not None and account.status == Account.COOLING:
                await sync_to_async(end_cooldown, thread_sensitive=False)(account, now)
            return account
    return await sync_to_async(select_account, thread_sensitive=False)(provider_id, exclude, strategy)


def write_local_stamps() -> None:
    """Record the in-memory pool's recent picks as last-used times (the log writer calls this every batch)."""

    if _SQLITE:
        local_pool.write_stamps()


def select_account(provider_id: int, exclude: Iterable[int], strategy: str) -> Account | None:
    """Pick the next account in the database and stamp it as used, or None when none is usable."""

    if connection.vendor == "postgresql":
        return _select_postgres(provider_id, list(exclude), strategy)
    if connection.vendor == "sqlite":
        return _select_sqlite(provider_id, list(exclude), strategy)
    return _select(provider_id, list(exclude), strategy, skip_locked=True)


# One statement picks and stamps: SQLite runs it atomically (writers are serialised), and
# it skips the ORM's query building, which was a third of a request's CPU in the profile.
_SQLITE_PICK = """
UPDATE accounts_account SET last_used_at = %s
WHERE id = (
    SELECT c.id FROM accounts_account AS c
    WHERE c.provider_id = %s
      AND (c.status = 'active' OR (c.status = 'cooling' AND c.cooldown_until <= %s)) {exclude}
    ORDER BY (CASE WHEN %s = 'balance' THEN c.balance END) DESC NULLS LAST,
             c.last_used_at ASC NULLS FIRST, c.id ASC
    LIMIT 1)
RETURNING *
"""


def _select_sqlite(provider_id: int, exclude: list[int], strategy: str) -> Account | None:
    exclude_sql = f"AND c.id NOT IN ({', '.join(['%s'] * len(exclude))})" if exclude else ""
    sql = _SQLITE_PICK.format(exclude=exclude_sql)
    # The stamp is taken under the lock so that stamps follow pick order (exact LRU).
    with _sqlite_lock:
        now = timezone.now()
        stamp = connection.ops.adapt_datetimefield_value(now)
        picked = list(Account.objects.raw(sql, [stamp, provider_id, stamp, *exclude, strategy]))
    if not picked:
        return None
    account = picked[0]
    if account.status == Account.COOLING:
        end_cooldown(account, now)
    return account


def _select_postgres(provider_id: int, exclude: list[int], strategy: str) -> Account | None:
    # accounts_pick_account (migration 0003) picks, locks and stamps in one round trip.
    sql = "SELECT * FROM accounts_pick_account(%s, %s::bigint[], %s, %s)"
    for _ in range(3):
        now = timezone.now()
        picked = list(Account.objects.raw(sql, [provider_id, exclude, strategy, now]))
        if picked:
            account = picked[0]
            if account.status == Account.COOLING:
                end_cooldown(account, now)
            return account
        # Empty: nothing usable — or the chosen account was disabled while we waited for it.
        if not _usable(provider_id, exclude, now).exists():
            return None
    return None


def end_cooldown(account: Account, now: dt.datetime) -> None:
    with transaction.atomic():
        if Account.objects.filter(pk=account.pk, status=Account.COOLING).update(
                status=Account.ACTIVE, cooldown_until=None):
            _close_events(account, "cooldown", now)
    account.status, account.cooldown_until = Account.ACTIVE, None
    local_pool.apply(account.pk, Account.ACTIVE)


def _usable(provider_id: int, exclude: list[int], now: dt.datetime) -> QuerySet[Account]:
    qs = Account.objects.filter(provider_id=provider_id).filter(
        Q(status=Account.ACTIVE) | Q(status=Account.COOLING, cooldown_until__lte=now))
    return qs.exclude(id__in=exclude) if exclude else qs


def _select(provider_id: int, exclude: list[int], strategy: str, skip_locked: bool) -> Account | None:
    now = timezone.now()
    with transaction.atomic():
        qs = _usable(provider_id, exclude, now)
        if strategy == "balance":
            qs = qs.order_by(F("balance").desc(nulls_last=True), F("last_used_at").asc(nulls_first=True), "id")
        else:
            qs = qs.order_by(F("last_used_at").asc(nulls_first=True), "id")
        if skip_locked:
            qs = qs.select_for_update(skip_locked=True, of=("self",))
        account = qs.select_related("provider").first()
        if account is None:
            return None
        account.last_used_at = now
        fields = ["last_used_at"]
        if account.status == Account.COOLING:
            account.status, account.cooldown_until = Account.ACTIVE, None
            fields += ["status", "cooldown_until"]
            _close_events(account, "cooldown", now)
        account.save(update_fields=fields)
    return account


def _close_events(account: Account, how: str, now: dt.datetime) -> None:
    DisableEvent.objects.filter(account=account, ended_at__isnull=True).update(ended_at=now, ended_by=how)
    transaction.on_commit(lambda: events.publish("account.enabled", {"account_id": account.pk, "how": how}))


def disable_account(account_id: int, *, rule: str, tier: str, status_code: int | None,
                    excerpt: str, cooldown_until: dt.datetime | None = None) -> bool:
    """Disable (or cool down) an account once; False when it already was.

    The conditional UPDATE makes concurrent failures of the same account write
    exactly one DisableEvent, on any number of gateway processes.
    """

    now = timezone.now()
    new_status = Account.COOLING if cooldown_until else Account.DISABLED
    with transaction.atomic():
        changed = Account.objects.filter(pk=account_id, status=Account.ACTIVE).update(
            status=new_status, cooldown_until=cooldown_until
        )
        if not changed:
            # Out of the pool already (perhaps changed by another process): stop picking it here too.
            transaction.on_commit(lambda: local_pool.apply(account_id, Account.DISABLED))
            return False
        transaction.on_commit(lambda: local_pool.apply(account_id, new_status, cooldown_until))
        event = DisableEvent.objects.create(
            account_id=account_id, created_at=now, rule=rule, tier=tier,
            status_code=status_code, excerpt=excerpt, cooldown_until=cooldown_until,
        )
        payload = {"account_id": account_id, "event_id": event.pk, "tier": tier, "rule": rule,
                   "status_code": status_code, "cooldown_until": cooldown_until.isoformat() if cooldown_until else None}
        transaction.on_commit(lambda: events.publish("account.disabled", payload))
    log.info("account %s disabled (%s, %s)", account_id, tier, status_code)
    return True


def enable_account(account_id: int, how: str = "hand") -> bool:
    """Make an account usable again and close its open DisableEvents as ended ``how``.

    Only ``how="hand"`` may re-enable an account that was disabled by hand. False
    when nothing changed (already active, gone, or disabled by hand).
    """

    now = timezone.now()
    with transaction.atomic():
        account = Account.objects.select_for_update().filter(pk=account_id).first()
        if account is None or account.status == Account.ACTIVE and not account.disabled_by_hand:
            return False
        if account.disabled_by_hand and how != "hand":
            return False
        account.status, account.cooldown_until, account.disabled_by_hand = Account.ACTIVE, None, False
        account.save(update_fields=["status", "cooldown_until", "disabled_by_hand"])
        _close_events(account, how, now)
        transaction.on_commit(lambda: local_pool.apply(account_id, Account.ACTIVE))
    return True


def disable_by_hand(account_id: int) -> bool:
    """Take an account out of the pool until ops put it back; False when it already was out by hand.

    An event the pool opened earlier stays open: it still says why the account first failed.
    """

    with transaction.atomic():
        changed = Account.objects.filter(pk=account_id, disabled_by_hand=False).update(
            status=Account.DISABLED, disabled_by_hand=True, cooldown_until=None)
        if not changed:
            return False
        transaction.on_commit(lambda: local_pool.apply(account_id, Account.DISABLED))
        event = DisableEvent.objects.create(account_id=account_id, rule="manual", tier="manual")
        payload = {"account_id": account_id, "event_id": event.pk, "tier": "manual", "rule": "manual",
                   "status_code": None, "cooldown_until": None}
        transaction.on_commit(lambda: events.publish("account.disabled", payload))
    return True
