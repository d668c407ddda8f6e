"""The outbox: which webhooks an event reaches, once each, and how a failing one is tried and given up."""

from __future__ import annotations

import asyncio
import datetime as dt
import pytest

from accounts import pool
from accounts.models import Account, Provider
from alerts import delivery
from alerts.events import budget_reached, enqueue
from alerts.models import Delivery, Webhook
from tests.e2e.test_alerts import Receiver

pytestmark = pytest.mark.django_db(transaction=True)


class HeldLease:
    ttl = 3.0

    def hold(self) -> bool:
        return True

    def release(self) -> None:
        pass


def an_account(label: str = "a0") -> Account:
    provider = Provider.objects.create(name="p", protocol="openai_chat", base_url="http://127.0.0.1:1/v1")
    return Account.objects.create(provider=provider, label=label)


def test_an_event_reaches_each_enabled_webhook_that_wants_it_once() -> None:
    wants = Webhook.objects.create(name="wants", url="http://127.0.0.1:1/a")
    Webhook.objects.create(name="off", url="http://127.0.0.1:1/b", enabled=False)
    Webhook.objects.create(name="not-budgets", url="http://127.0.0.1:1/c", on_budget=False)
    alert = budget_reached("team", "tokens", 100, "today (UTC)", "tokens:day:1:7:team")
    enqueue([alert])
    enqueue([alert])  # noticed again (another request, another process)
    assert list(Delivery.objects.values_list("webhook_id", "event")) == [(wants.pk, "budget_reached")]


def test_a_disabled_account_is_queued_with_its_disable_but_a_cool_down_is_not() -> None:
    Webhook.objects.create(name="ops", url="http://127.0.0.1:1/a", on_provider_low=False)
    cooling = an_account("cooling")
    provider = Provider.objects.get()
    disabled = Account.objects.create(provider=provider, label="gone")
    pool.disable_account(cooling.pk, rule="r", tier="tier3", status_code=429, excerpt="",
                         cooldown_until=dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=30))
    pool.disable_account(disabled.pk, rule="r", tier="tier2", status_code=401, excerpt="sk-secret-here")
    [d] = Delivery.objects.all()
    assert d.payload["account"] == "gone" and d.payload["status_code"] == 401
    assert "sk-secret-here" not in str(d.payload)


def test_a_webhook_that_keeps_failing_is_tried_eight_times_then_given_up() -> None:
    failing = Receiver(statuses=[500] * 100)
    try:
        Webhook.objects.create(name="broken", url=failing.url)
        enqueue([budget_reached("team", "tokens", 100, "today (UTC)", "s")])
        worker = delivery.AlertWorker(HeldLease(), retry_base=0.0, timeout=5.0)

        async def rounds() -> None:
            for _ in range(delivery.MAX_ATTEMPTS + 2):
                await worker.run_once()
            await worker.aclose()

        asyncio.run(rounds())
        d = Delivery.objects.get()
        assert (d.status, d.attempts, d.last_error) == (Delivery.FAILED, delivery.MAX_ATTEMPTS, "HTTP 500")
        assert len(failing.bodies) == delivery.MAX_ATTEMPTS
        assert failing.url not in d.last_error
    finally:
        failing.close()


def test_the_wait_between_tries_doubles_up_to_an_hour() -> None:
    assert [delivery.wait_after(n, 10) for n in (1, 2, 3, 4)] == [10, 20, 40, 80]
    assert delivery.wait_after(30, 10) == delivery.MAX_WAIT


def test_slack_gets_only_the_text() -> None:
    payload = budget_reached("team", "tokens", 100, "today (UTC)", "s").payload()
    assert delivery.body(Webhook.SLACK, payload) == {"text": payload["text"]}
    assert delivery.body(Webhook.JSON, payload)["client_key"] == "team"


def test_a_provider_short_of_accounts_is_alerted_once_until_one_is_put_back() -> None:
    Webhook.objects.create(name="low", url="http://127.0.0.1:1/a", on_account_disabled=False, min_active_accounts=2)
    first = an_account("first")
    provider = Provider.objects.get()
    second, third = (Account.objects.create(provider=provider, label=label) for label in ("second", "third"))

    def low_alerts() -> list[int]:
        return [d.payload["usable_accounts"] for d in Delivery.objects.order_by("id")]

    pool.disable_account(first.pk, rule="r", tier="t", status_code=429, excerpt="",
                         cooldown_until=dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=30))
    assert low_alerts() == []  # cooling down: still the provider's
    pool.disable_account(second.pk, rule="r", tier="t", status_code=401, excerpt="")
    assert low_alerts() == []  # two usable: the first (cooling) and the third
    pool.disable_account(third.pk, rule="r", tier="t", status_code=401, excerpt="")
    assert low_alerts() == [1]
    pool.disable_by_hand(first.pk)
    assert low_alerts() == [1]  # fewer still, but the same shortage
    pool.enable_account(second.pk)
    pool.disable_account(second.pk, rule="r", tier="t", status_code=401, excerpt="")
    assert low_alerts() == [1, 0]  # put back, then out again: a new one


def test_a_permanent_answer_is_told_from_one_worth_trying_again() -> None:
    from alerts.delivery import answered

    assert answered(1, 200).error == "" and answered(1, 204).error == ""
    for status in (400, 401, 403, 404, 405, 410, 413, 422):
        assert answered(1, status).permanent, status
    for status in (408, 429, 500, 502, 503, 301, 302):
        result = answered(1, status)
        assert result.error == f"HTTP {status}" and not result.permanent, status
