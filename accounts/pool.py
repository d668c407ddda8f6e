"""Account selection and the state changes of the pool.

Selection is atomic across gateway processes: on PostgreSQL one
``SELECT … FOR UPDATE SKIP LOCKED`` picks and stamps an account inside one
transaction; SQLite serialises writers anyway, so a process lock suffices.
Each state change writes its audit row and broadcasts after commit.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
from collections.abc import Iterable
from decimal import Decimal

from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from . import events
from .models import Account, ApiKey, DisableEvent

log = logging.getLogger(__name__)
_sqlite_lock = threading.Lock()

EXCERPT_LIMIT = 500
_SECRETISH = re.compile(r"(sk-[A-Za-z0-9_\-]{4,}|gw-[A-Za-z0-9_\-]{4,}|Bearer\s+\S+|key[\"'=:\s]+[A-Za-z0-9_\-]{16,})")


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """An excerpt safe to store and show: known secrets and anything key-shaped removed."""

    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    text = _SECRETISH.sub("[redacted]", text)
    return text[:EXCERPT_LIMIT]


def select_account(provider_id: int, exclude: Iterable[int], strategy: str) -> Account | None:
    """Pick the next account and stamp it as used, or None when none is usable."""

    if connection.vendor == "sqlite":
        with _sqlite_lock:
            return _select(provider_id, list(exclude), strategy, skip_locked=False)
    return _select(provider_id, list(exclude), strategy, skip_locked=True)


def _select(provider_id: int, exclude: list[int], strategy: str, skip_locked: bool) -> Account | None:
    now = timezone.now()
    with transaction.atomic():
        qs = Account.objects.filter(provider_id=provider_id).filter(
            Q(status=Account.ACTIVE) | Q(status=Account.COOLING, cooldown_until__lte=now)
        )
        if exclude:
            qs = qs.exclude(id__in=exclude)
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
            return False
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
    now = timezone.now()
    with transaction.atomic():
        account = Account.objects.select_for_update().filter(pk=account_id).first()
        if account is None:
            return False
        account.status, account.cooldown_until, account.disabled_by_hand = Account.ACTIVE, None, False
        account.save(update_fields=["status", "cooldown_until", "disabled_by_hand"])
        _close_events(account, how, now)
    return True


def disable_by_hand(account_id: int) -> None:
    with transaction.atomic():
        Account.objects.filter(pk=account_id).update(status=Account.DISABLED, disabled_by_hand=True,
                                                     cooldown_until=None)
        DisableEvent.objects.create(account_id=account_id, rule="manual", tier="manual")
        transaction.on_commit(lambda: events.publish("account.disabled", {"account_id": account_id,
                                                                            "tier": "manual"}))


def record_usage(account_id: int | None, key_id: int | None, ok: bool, input_tokens: int,
                 output_tokens: int, cached_tokens: int, reasoning_tokens: int,
                 cost: Decimal | None = None) -> None:
    """Counters updated with F() expressions: no lost updates under concurrency."""

    delta = {
        "requests": F("requests") + 1,
        "errors": F("errors") + (0 if ok else 1),
        "input_tokens": F("input_tokens") + input_tokens,
        "output_tokens": F("output_tokens") + output_tokens,
        "cached_tokens": F("cached_tokens") + cached_tokens,
        "reasoning_tokens": F("reasoning_tokens") + reasoning_tokens,
    }
    if account_id is not None:
        extra = {"balance": F("balance") - cost} if cost else {}
        Account.objects.filter(pk=account_id).update(**delta, **extra)
    if key_id is not None:
        ApiKey.objects.filter(pk=key_id).update(**delta)
