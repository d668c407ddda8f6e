"""Accounts the pool disabled before re-tests existed get their schedule: the rule that disabled
them (their open disable event's) says when, counted from when it happened; a test already
overdue is due now. Accounts disabled by hand are left alone."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps
from django.utils import timezone


def seconds(rule: dict[str, Any], status: int | None) -> float | None:
    """accounts.rules.retest_after as it is when this migration is written."""

    value = rule.get("retest_after")
    if isinstance(value, dict):
        value = value.get(str(status))
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    return float(value) if ok else None  # type: ignore[arg-type]


def schedule(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    account = apps.get_model("accounts", "Account")
    event = apps.get_model("accounts", "DisableEvent")
    now = timezone.now()
    waiting = account.objects.filter(status="disabled", disabled_by_hand=False, retest_at__isnull=True)
    for acc in waiting.select_related("provider"):
        last = (event.objects.filter(account_id=acc.pk, ended_at__isnull=True).exclude(rule="manual")
                .order_by("-created_at", "-id").first())
        rules = {r.get("name"): r for r in acc.provider.rules or [] if isinstance(r, dict)}
        if last is None or last.rule not in rules or rules[last.rule].get("action") != "disable":
            continue
        interval = seconds(rules[last.rule], last.status_code)
        if interval is not None:
            account.objects.filter(pk=acc.pk).update(
                retest_at=max(now, last.created_at + dt.timedelta(seconds=interval)), retest_interval=interval)


class Migration(migrations.Migration):
    dependencies = [("accounts", "0012_lease")]

    operations = [migrations.RunPython(schedule, migrations.RunPython.noop)]
