"""The alerts: what each event says, and its rows in the outbox (one per webhook that wants it).

Payloads carry names (provider, account label, client key name), statuses and rules, never a key
or an upstream's error text: a webhook is often a chat channel many people read.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Max, Q
from django.utils import timezone

from accounts.prices import dollars

from .models import Delivery, Webhook

ACCOUNT_DISABLED, PROVIDER_LOW, BUDGET_REACHED = "account_disabled", "provider_low", "budget_reached"
TEST = "test"  # sent by hand from the admin, to one webhook
USD = "usd"  # a budget's unit whose amounts are micro-dollars (gateway.limits.budgets.USD)
# Which webhooks want which event (their admin check boxes).
WANTS = {ACCOUNT_DISABLED: Q(on_account_disabled=True), PROVIDER_LOW: Q(on_provider_low=True),
         BUDGET_REACHED: Q(on_budget=True)}


@dataclass(frozen=True)
class Alert:
    event: str
    key: str  # the same event has the same key, whoever notices it and however often
    text: str  # one line for people (a Slack message)
    fields: dict[str, Any] = field(default_factory=dict)
    min_active_below: int | None = None  # provider_low: only webhooks whose minimum is above this count

    def payload(self) -> dict[str, Any]:
        return {"event": self.event, "text": self.text, **self.fields, "at": timezone.now().isoformat()}


def enqueue(alerts: Iterable[Alert]) -> None:
    """Write each alert's deliveries: one per enabled webhook that wants it, each once."""

    for alert in alerts:
        hooks = Webhook.objects.filter(WANTS[alert.event], enabled=True)
        if alert.min_active_below is not None:
            hooks = hooks.filter(min_active_accounts__gt=alert.min_active_below)
        rows = [Delivery(webhook=hook, event=alert.event, event_key=alert.key[:200], payload=alert.payload())
                for hook in hooks]
        # ignore_conflicts: a key already in the outbox (another process noticed it too) is skipped.
        Delivery.objects.bulk_create(rows, ignore_conflicts=True)


def account_disabled(event: Any) -> list[Alert]:
    """The alerts of a new ``accounts.models.DisableEvent`` (none for a cool-down): the account (not
    when disabled by hand: ops did that), and its provider if it is now short of usable accounts
    (active or cooling down)."""

    from accounts.models import Account, DisableEvent

    account = Account.objects.select_related("provider").get(pk=event.account_id)
    provider = account.provider
    if event.cooldown_until is not None:
        return []  # a cool-down ends by itself: the account still counts as the provider's
    alerts = []
    if event.rule != "manual":
        status = f"HTTP {event.status_code}" if event.status_code else "no answer"
        alerts.append(Alert(
            ACCOUNT_DISABLED, f"account_disabled:{event.pk}",
            f"Account {account.label} of provider {provider.name} disabled: {status} ({event.tier or event.rule}).",
            {"provider": provider.name, "account": account.label, "account_id": account.pk,
             "status_code": event.status_code, "rule": event.rule, "tier": event.tier, "disable_event_id": event.pk}))
    usable = Account.objects.filter(provider=provider, status__in=(Account.ACTIVE, Account.COOLING)).count()
    # A shortage lasts until an account of the provider is put back (by hand or a probe): the next
    # one is a new alert, the disables in between are not.
    back = (DisableEvent.objects.filter(account__provider=provider, ended_by__in=("hand", "probe"))
            .aggregate(at=Max("ended_at"))["at"])
    episode = int(back.timestamp()) if isinstance(back, dt.datetime) else 0
    alerts.append(Alert(
        PROVIDER_LOW, f"provider_low:{provider.pk}:{episode}",
        f"Provider {provider.name} has {usable} usable account(s) left.",
        {"provider": provider.name, "usable_accounts": usable}, min_active_below=usable))
    return alerts


def amount(unit: str, limit: int) -> str:
    """A budget's limit as people read it: USD budgets (kept in micro-dollars) as the project writes
    money (``accounts.formats.money``: "$0.50"), others as a count ("500000 tokens")."""

    return dollars(limit) if unit == USD else f"{limit:,} {unit}"


def budget_reached(key_name: str, unit: str, limit: int, period: str, scope: str, team: str = "") -> Alert:
    """A client key's budget refused a request (``scope``: the refusal's identity,
    ``gateway.limits.limits.refusal_event``: the budget and the window-length block it happened in, so
    once per window's length; ``period``: "the last 5 hours"). ``limit`` in the budget's unit
    (micro-dollars for "usd"); the alert says it in dollars. ``team``: the budget was the key's team's,
    spent by all of its keys."""

    shown = amount(unit, limit)
    if team:
        return Alert(BUDGET_REACHED, f"budget:{scope}",
                     f"Team {team} reached its budget of {shown} in {period} (refused client key {key_name}).",
                     {"team": team, "client_key": key_name, "unit": unit, "limit": shown, "period": period})
    return Alert(BUDGET_REACHED, f"budget:{scope}",
                 f"Client key {key_name} reached its budget of {shown} in {period}.",
                 {"client_key": key_name, "unit": unit, "limit": shown, "period": period})


def test_alert(webhook_name: str) -> Alert:
    """What "Send a test alert" posts: a harmless line that says where it came from."""

    return Alert(TEST, f"test:{uuid.uuid4().hex}",
                 f"Test alert from the LLM gateway to webhook {webhook_name}: alerts reach this channel.",
                 {"webhook": webhook_name})
