"""The admin's Test action, run in the background: any number of accounts, each tested once by one
process, through the gateway's own upstream client, on every upstream protocol."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections.abc import Iterator

import pytest

from accounts import pool
from accounts.models import Account, DisableEvent, ModelAlias, Provider
from gateway.background.prober import BATCH, Prober, claim, probe_model
from gateway.exchange.upstream import UpstreamClient
from gateway.state import SnapshotCache
from mockupstream.server import ServerThread

pytestmark = pytest.mark.django_db(transaction=True)

PROTOCOLS = ["openai_chat", "anthropic", "responses"]


@pytest.fixture(scope="module")
def upstream() -> Iterator[ServerThread]:
    with ServerThread() as server:
        yield server


def account(upstream: ServerThread, protocol: str, key: str, label: str = "a") -> Account:
    provider, _ = Provider.objects.get_or_create(name=f"p-{protocol}", defaults={
        "protocol": protocol, "base_url": upstream.url + "/v1", "served_models": ["mock-text"]})
    acc = Account(provider=provider, label=label)
    acc.set_secret(key)
    acc.save()
    return acc


def request_tests(*accounts: Account) -> None:
    from django.utils import timezone

    Account.objects.filter(pk__in=[a.pk for a in accounts]).update(probe_requested_at=timezone.now())


def run_prober() -> int:
    """One process's prober, once through everything requested."""

    client = UpstreamClient()
    prober = Prober(SnapshotCache(ttl=0), client, interval=0)

    async def work() -> int:
        try:
            total = 0
            while ran := await prober.run_once():
                total += ran
            return total
        finally:
            await client.aclose()

    return asyncio.run(work())


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_good_account_answers_ok_on_every_protocol(upstream: ServerThread, protocol: str) -> None:
    acc = account(upstream, protocol, "sk-probe-good-1234")
    request_tests(acc)
    assert run_prober() == 1
    acc.refresh_from_db()
    assert (acc.probe_ok, acc.probe_summary, acc.probe_requested_at) == (True, "OK", None)
    assert acc.probed_at is not None
    assert upstream.state.recent[-1]["body"]["model"] == "mock-text"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_failing_account_is_reported_with_its_tier_and_without_its_key(upstream: ServerThread,
                                                                         protocol: str) -> None:
    acc = account(upstream, protocol, "sk-fail-402-abcdef")
    request_tests(acc)
    run_prober()
    acc.refresh_from_db()
    assert acc.probe_ok is False
    assert acc.probe_summary.startswith("HTTP 402 (tier3_account_exhausted): ")
    assert "sk-fail-402-abcdef" not in acc.probe_summary
    assert acc.status == Account.ACTIVE  # a test reports; it does not disable


def test_a_success_puts_a_pool_disabled_account_back_but_not_one_disabled_by_hand(upstream: ServerThread) -> None:
    by_pool = account(upstream, "openai_chat", "sk-probe-good-1", "by-pool")
    by_hand = account(upstream, "openai_chat", "sk-probe-good-2", "by-hand")
    pool.disable_account(by_pool.pk, rule="auth_invalid", tier="auth_invalid", status_code=401, excerpt="")
    pool.disable_by_hand(by_hand.pk)
    request_tests(by_pool, by_hand)
    run_prober()
    by_pool.refresh_from_db()
    by_hand.refresh_from_db()
    assert (by_pool.status, by_pool.probe_summary) == (Account.ACTIVE, "OK — account re-enabled")
    assert DisableEvent.objects.get(account=by_pool).ended_by == "probe"
    assert (by_hand.status, by_hand.probe_summary) == (Account.DISABLED, "OK — left disabled: it was disabled by hand")


def test_any_number_of_accounts_is_tested_each_exactly_once_across_processes(upstream: ServerThread) -> None:
    accounts = [account(upstream, "openai_chat", f"sk-probe-many-{i:03}", f"m{i}") for i in range(2 * BATCH + 7)]
    request_tests(*accounts)
    ran: list[int] = []
    start = threading.Barrier(2)

    def process() -> None:
        start.wait()
        ran.append(run_prober())

    threads = [threading.Thread(target=process) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(ran) == len(accounts)  # none twice, none left out
    assert not Account.objects.filter(probe_requested_at__isnull=False).exists()
    assert Account.objects.filter(probe_ok=True).count() == len(accounts)


def test_a_claim_takes_each_request_once() -> None:
    provider = Provider.objects.create(name="p", protocol="openai_chat", base_url="http://127.0.0.1:9/v1")
    acc = Account(provider=provider, label="a")
    acc.set_secret("sk-claim-0001")
    acc.save()
    request_tests(acc)
    first, second = claim(), claim()
    assert [c.account_id for c in first] == [acc.pk] and second == []
    assert first[0].secret == "sk-claim-0001"


def test_the_probe_model_is_one_the_provider_really_serves(upstream: ServerThread) -> None:
    provider = Provider.objects.create(name="p", protocol="openai_chat", base_url=upstream.url + "/v1")
    assert probe_model(provider) == "probe"
    ModelAlias.objects.create(name="claude-*", provider=provider, upstream_model="*")
    ModelAlias.objects.create(name="fast", provider=provider, upstream_model="gpt-5-mini")
    assert probe_model(provider) == "gpt-5-mini"
    provider.served_models = ["mock-text"]
    assert probe_model(provider) == "mock-text"


def test_an_unreachable_upstream_is_reported_as_a_network_failure() -> None:
    provider = Provider.objects.create(name="gone", protocol="openai_chat", base_url="http://127.0.0.1:9/v1")
    acc = Account(provider=provider, label="a")
    acc.set_secret("sk-probe-unreachable-1")
    acc.save()
    request_tests(acc)
    run_prober()
    acc.refresh_from_db()
    assert acc.probe_ok is False and acc.probe_summary.startswith("network failure")


def test_a_scheduled_test_puts_back_an_account_that_answers_again_and_reschedules_one_that_does_not(
        upstream: ServerThread) -> None:
    from django.utils import timezone

    from gateway.background.lease import Lease
    from gateway.background.poolhealth import PoolHealth

    healed = account(upstream, "anthropic", "sk-fail-401-healed-c0de", "healed")
    still_bad = account(upstream, "anthropic", "sk-fail-401-still-bad-beef", "still-bad")
    for acc in (healed, still_bad):
        pool.disable_account(acc.pk, rule="auth_invalid", tier="auth_invalid", status_code=401, excerpt="",
                             retest_after=60)
    Account.objects.update(retest_at=timezone.now())  # both due
    upstream.state.healed.add("c0de")  # its key works again
    leader = PoolHealth(Lease("pool-health", 30, "leader"))
    try:
        assert asyncio.run(leader.run_once())
        assert run_prober() == 2
    finally:
        upstream.state.healed.clear()
    healed.refresh_from_db()
    still_bad.refresh_from_db()
    assert (healed.status, healed.probe_summary, healed.retest_at) == (Account.ACTIVE, "OK — account re-enabled", None)
    assert DisableEvent.objects.get(account=healed).ended_by == "probe"
    assert still_bad.status == Account.DISABLED and still_bad.probe_summary.startswith("HTTP 401 (auth_invalid)")
    assert still_bad.retest_interval == 120 and still_bad.retest_at > timezone.now() + dt.timedelta(seconds=100)
    assert DisableEvent.objects.get(account=still_bad).ended_at is None


def test_an_account_disabled_by_hand_is_never_tested_on_a_schedule(upstream: ServerThread) -> None:
    from django.utils import timezone

    from gateway.background.lease import Lease
    from gateway.background.poolhealth import PoolHealth

    acc = account(upstream, "openai_chat", "sk-probe-good-by-hand", "by-hand")
    pool.disable_account(acc.pk, rule="auth_invalid", tier="auth_invalid", status_code=401, excerpt="",
                         retest_after=1)
    pool.disable_by_hand(acc.pk)
    Account.objects.filter(pk=acc.pk).update(retest_at=timezone.now())  # as if a schedule were left over
    assert asyncio.run(PoolHealth(Lease("pool-health", 30, "leader")).run_once())
    assert run_prober() == 0
    acc.refresh_from_db()
    assert acc.status == Account.DISABLED and acc.probed_at is None
