"""Usage accounting by the request-log writer: counters and balances, one UPDATE per account per batch."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import Account, ApiKey, Provider, RequestLog
from gateway.app import log_sinks
from gateway.log.record import Attempt
from gateway.log.writer import LogRecord, LogWriter

pytestmark = pytest.mark.django_db(transaction=True)

PRICES = {"gpt-5-mini": {"input": 0.25, "output": 2, "cached": 0.025}}


def setup_pool() -> tuple[Provider, Account, Account, ApiKey]:
    provider = Provider.objects.create(name="priced", protocol="openai_chat", base_url="http://127.0.0.1:9/v1",
                                       prices=PRICES)
    accounts = []
    for label in ("a", "b"):
        account = Account(provider=provider, label=label, balance=Decimal("10"))
        account.set_secret(f"sk-usage-{label}-0000")
        account.save()
        accounts.append(account)
    key = ApiKey(name="client")
    key.set_key("gw-usage-client-key")
    key.save()
    return provider, accounts[0], accounts[1], key


def record(provider: Provider, account: Account, key: ApiKey, n: int, model: str = "gpt-5-mini",
           status: int = 200) -> LogRecord:
    return LogRecord(request_id=f"req_{account.label}_{n}", client_protocol="openai_chat", client_key_id=key.pk,
                     client_key_name=key.name, provider_id=provider.pk, account_id=account.pk,
                     model_requested=model, model_sent=model, status=status,
                     input_tokens=1000, output_tokens=100, cached_tokens=200)


def write(batch: list[LogRecord]) -> None:
    """One batch exactly as the writer thread writes it (its flush() would drain the global queue too)."""

    LogWriter(sinks=log_sinks(settings))._write(batch)


ONE_REQUEST = Decimal("0.000405")  # 800 × 0.25 + 200 × 0.025 + 100 × 2, per million


def test_a_priced_request_is_charged_to_its_account_and_logged_with_its_cost() -> None:
    provider, a, b, key = setup_pool()
    batch = [record(provider, a, key, n) for n in range(3)]
    batch += [record(provider, b, key, 0, model="unpriced-model"), record(provider, b, key, 1, status=429)]
    with CaptureQueriesContext(connection) as queries:
        write(batch)
    a.refresh_from_db()
    b.refresh_from_db()
    assert a.balance == Decimal("10") - 3 * ONE_REQUEST
    assert b.balance == Decimal("10")  # no price known, or no answer: nothing charged
    assert (a.requests, a.input_tokens, a.output_tokens, a.cached_tokens) == (3, 3000, 300, 600)
    assert (b.requests, b.errors) == (2, 1)
    costs = dict(RequestLog.objects.values_list("request_id", "cost"))
    assert costs == {"req_a_0": ONE_REQUEST, "req_a_1": ONE_REQUEST, "req_a_2": ONE_REQUEST,
                     "req_b_0": None, "req_b_1": None}
    key.refresh_from_db()
    assert key.requests == 5
    account_updates = [q for q in queries.captured_queries
                       if q["sql"].startswith('UPDATE "accounts_account"')]
    assert len(account_updates) == 2  # one per account in the batch, whatever its size


def test_every_failed_attempt_counts_against_its_account_and_the_tokens_go_to_the_one_that_answered() -> None:
    provider, a, b, key = setup_pool()
    retried = record(provider, b, key, 0)
    retried.attempts = [Attempt(a.pk, "a", 429, "disable", 5), Attempt(a.pk, "a", 500, "retry", 5),
                        Attempt(b.pk, "b", 200, "ok", 50)]
    failed_everywhere = record(provider, b, key, 1, status=503)
    failed_everywhere.attempts = [Attempt(a.pk, "a", None, "network", 5), Attempt(b.pk, "b", 402, "disable", 5)]
    write([retried, failed_everywhere])
    a.refresh_from_db()
    b.refresh_from_db()
    key.refresh_from_db()
    assert (a.requests, a.errors, a.input_tokens) == (3, 3, 0)
    assert (b.requests, b.errors, b.input_tokens, b.output_tokens) == (2, 1, 2000, 200)
    assert (key.requests, key.errors) == (2, 1)  # the client's figures: two requests, one failed


def test_an_account_without_a_balance_is_not_given_one() -> None:
    provider, a, _, key = setup_pool()
    Account.objects.filter(pk=a.pk).update(balance=None)
    write([record(provider, a, key, 0)])
    a.refresh_from_db()
    assert a.balance is None and a.requests == 1


def test_two_writers_charging_the_same_accounts_lose_no_update() -> None:
    # Two gateway processes each run a writer; F() expressions make their UPDATEs add up.
    provider, a, b, key = setup_pool()
    start = threading.Barrier(2)

    def run(w: int) -> None:
        try:
            start.wait()
            for batch in range(20):
                write([record(provider, a if n % 2 else b, key, w * 1000 + batch * 10 + n) for n in range(5)])
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    a.refresh_from_db()
    b.refresh_from_db()
    key.refresh_from_db()
    assert RequestLog.objects.count() == 200
    assert (a.requests, b.requests, key.requests) == (80, 120, 200)
    assert a.input_tokens + b.input_tokens == 200 * 1000
    assert a.balance == Decimal("10") - 80 * ONE_REQUEST
    assert b.balance == Decimal("10") - 120 * ONE_REQUEST
