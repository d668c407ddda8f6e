"""Acting on an account from the dashboard: enable, disable with a reason, test now.

Each action changes the pool through its own functions (``accounts.pool``: the state, its
DisableEvent and the live broadcast in one transaction, as the admin's actions and the events page's
Re-enable do) and records who did it in the same transaction: a ``LogEntry`` on the account, which
the admin shows in the account's History and its Recent actions. What came of it is a message tagged
with the account, shown on the account's own row (:func:`notes`).

Why an account is out of the pool is its open DisableEvent: the rule that matched, or ops' reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from django.contrib import messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.messages.storage.base import Message
from django.db import transaction
from django.http import HttpRequest

from accounts import formats, pool, testnow
from accounts.models import Account, DisableEvent

TAG = "account-"  # a message's extra tag naming the account it is about
REASON_MAX = 500


def audit(user_id: int, account: Account, message: str) -> None:
    LogEntry.objects.log_actions(user_id, [account], CHANGE, change_message=message, single_object=True)


def enable(user_id: int, account: Account) -> bool:
    """Back into the pool by hand, its open events closed as ended by hand; False if it was in."""

    with transaction.atomic():
        changed = pool.enable_account(account.pk, "hand")
        if changed:
            audit(user_id, account, "Enabled from the dashboard")
    return changed


def disable(user_id: int, account: Account, reason: str) -> bool:
    """Out of the pool until ops put it back, the reason kept on its event; False if it was out by hand."""

    with transaction.atomic():
        changed = pool.disable_by_hand(account.pk, reason)
        if changed:
            audit(user_id, account, f"Disabled from the dashboard: {reason}")
    return changed


@dataclass(frozen=True)
class Tested:
    ok: bool
    summary: str
    latency_ms: int | None
    queued: bool = False

    def sentence(self) -> str:
        if self.queued:
            return ("test queued: no gateway runs in the process that served this page; one sends it within "
                    "seconds and the outcome shows under Last test")
        took = f" in {self.latency_ms:,} ms" if self.latency_ms is not None else ""
        return f"test {'passed' if self.ok else 'failed'}{took}: {self.summary}"


async def test_now(account: Account) -> Tested:
    """The probe the background tests send, sent now by this process's gateway and recorded as theirs
    (a success puts a pool-disabled account back); queued for a gateway process when none runs here."""

    for _receiver, answer in await testnow.test_requested.asend(sender=Account, account_id=account.pk):
        if answer is not None:
            outcome = cast(testnow.TestOutcome, answer)
            return Tested(outcome.ok, outcome.summary, outcome.latency_ms)
    return Tested(False, "", None, queued=True)


def tell(request: HttpRequest, account: Account, text: str, level: int = messages.SUCCESS) -> None:
    """What came of an action, for the account's row (the pages the actions go back to show it there)."""

    messages.add_message(request, level, text[:1].upper() + text[1:], extra_tags=f"{TAG}{account.pk}")


def notes(request: HttpRequest) -> tuple[dict[int, list[Message]], list[Message]]:
    """This request's messages: those about an account by its id (shown on its row), and the rest."""

    by_account: dict[int, list[Message]] = {}
    rest: list[Message] = []
    for message in messages.get_messages(request):
        tag = next((t for t in (message.extra_tags or "").split() if t.startswith(TAG)), "")
        if tag[len(TAG):].isdigit():
            by_account.setdefault(int(tag[len(TAG):]), []).append(message)
        else:
            rest.append(message)
    return by_account, rest


def open_events(account_ids: Iterable[int]) -> dict[int, DisableEvent]:
    """Each account's latest open DisableEvent (why it is out of the pool), in one query for a page."""

    latest: dict[int, DisableEvent] = {}
    for event in (DisableEvent.objects.filter(account_id__in=list(account_ids), ended_at__isnull=True)
                  .order_by("account_id", "-created_at", "-id")):
        latest.setdefault(event.account_id, event)
    return latest


def why(event: DisableEvent | None) -> str:
    """"rule auth_invalid: HTTP 401", "rule exhausted (tier3_account_exhausted): HTTP 429, cool-down until …",
    "disabled by hand: rotating the key"."""

    if event is None:
        return "—"
    if event.rule == "manual":
        return f"disabled by hand: {event.excerpt}" if event.excerpt else "disabled by hand"
    text = f"rule {event.rule or 'unnamed'}"
    if event.tier and event.tier != event.rule:
        text += f" ({event.tier})"
    if event.status_code:
        text += f": HTTP {event.status_code}"
    if event.cooldown_until:
        text += f", cool-down until {formats.when(event.cooldown_until)}"
    return text


def context(request: HttpRequest, accounts: list[Account]) -> dict[str, Any]:
    """What the action columns of a page of accounts need: why each is out, and what was just done."""

    out_ids = [a.pk for a in accounts if a.status != Account.ACTIVE or a.disabled_by_hand]
    events = open_events(out_ids) if out_ids else {}
    by_account, rest = notes(request)
    for a in accounts:
        a.why_disabled = why(events.get(a.pk))  # type: ignore[attr-defined]
        a.notes = by_account.get(a.pk, [])  # type: ignore[attr-defined]
    return {"messages": rest}
