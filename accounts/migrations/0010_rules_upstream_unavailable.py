"""The default classification rules gain a 5xx/529 rule (the next account, none disabled) and re-test
schedules on the rules that disable (accounts.rules). Providers whose rules are still the old
defaults get the new ones; rules ops have changed are left as they are."""

from typing import Any

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

# Literal copies: a migration must not change when accounts.rules does.
OLD_DEFAULTS: list[dict[str, Any]] = [
    {"name": "request_too_large", "status": [403], "contains": ["estimated cost"],
     "action": "return", "tier": "tier1_request_too_large"},
    {"name": "insufficient_tokens", "status": [403],
     "contains": ["insufficient tokens", "upgrade your plan", "limit reached"],
     "action": "retry", "tier": "tier2_insufficient_tokens"},
    {"name": "exhausted", "status": [429, 402], "contains": [],
     "action": "disable", "tier": "tier3_account_exhausted"},
    {"name": "auth_invalid", "status": [401], "contains": [],
     "action": "disable", "tier": "auth_invalid"},
]
NEW_DEFAULTS: list[dict[str, Any]] = [
    *OLD_DEFAULTS[:2],
    {**OLD_DEFAULTS[2], "retest_after": {"429": 600, "402": 21600}},
    {**OLD_DEFAULTS[3], "retest_after": 3600},
    {"name": "upstream_unavailable", "status": [500, 502, 503, 504, 529], "contains": [],
     "action": "retry", "tier": "upstream_unavailable"},
]


def replace(apps: StateApps, old: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
    provider = apps.get_model("accounts", "Provider")
    for p in provider.objects.only("pk", "rules"):
        if p.rules == old:
            provider.objects.filter(pk=p.pk).update(rules=new)


def forward(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    replace(apps, OLD_DEFAULTS, NEW_DEFAULTS)


def backward(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    replace(apps, NEW_DEFAULTS, OLD_DEFAULTS)


class Migration(migrations.Migration):
    dependencies = [("accounts", "0009_upstream_too_large")]

    operations = [migrations.RunPython(forward, backward)]
