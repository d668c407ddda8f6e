"""The request-log writer's batch, written with plain SQL: what Django reads back, and vanished references."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings

from accounts.models import Account, ApiKey, Provider, RequestLog
from dashboard.models import UsageBucket
from dashboard.rollup import bucket_of
from gateway.app import log_sinks
from gateway.log.writer import Attempt, LogRecord, LogWriter, _attempts_json

PRICES = {"gpt-5-mini": {"input": 0.25, "output": 2, "cached": 0.025}}
ONE_REQUEST = Decimal("0.000405")  # 800 × 0.25 + 200 × 0.025 + 100 × 2, per million
# A bucket no other test's traffic can reach: account 0 is shared by every request that found no account.
LONG_AGO = dt.datetime(2001, 1, 1, tzinfo=dt.timezone.utc)
LONG_AGO_BUCKET = bucket_of(LONG_AGO)


def make_provider(name: str) -> Provider:
    return Provider.objects.create(name=name, protocol="openai_chat", base_url="http://127.0.0.1:9/v1", prices=PRICES)


def make_account(provider: Provider, label: str) -> Account:
    account = Account(provider=provider, label=label, balance=Decimal("10"))
    account.set_secret(f"sk-reqlog-{label}-0000")
    account.save()
    return account


def make_key(name: str) -> ApiKey:
    key = ApiKey(name=name)
    key.set_key(f"gw-reqlog-{name}")
    key.save()
    return key


@pytest.fixture
def one_account() -> tuple[Provider, Account, ApiKey]:
    provider = make_provider("p")
    return provider, make_account(provider, "a"), make_key("k")


def writer_without_thread(monkeypatch: pytest.MonkeyPatch) -> LogWriter:
    """A writer whose batches go out only when the test flushes: its background thread would race the test."""

    writer = LogWriter(sinks=log_sinks(settings))
    monkeypatch.setattr(writer, "_start", lambda: None)
    return writer


def logged_rows(prefix: str) -> Any:
    """This test's rows only: on PostgreSQL, rows other processes commit meanwhile are visible here."""

    return RequestLog.objects.filter(request_id__startswith=prefix)


def logged(prefix: str) -> dict[str, RequestLog]:
    return {r.request_id: r for r in logged_rows(prefix)}


def record(request_id: str, provider: Provider, account: Account, key: ApiKey, **kw: Any) -> LogRecord:
    fields: dict[str, Any] = {
        "request_id": request_id, "client_protocol": "openai_chat", "client_key_id": key.pk,
        "client_key_name": key.name, "provider_id": provider.pk, "account_id": account.pk,
        "model_requested": "gpt-5-mini", "model_sent": "gpt-5-mini", "status": 200,
        "input_tokens": 1000, "output_tokens": 100, "cached_tokens": 200, "ttfb_ms": 80,
    }
    fields.update(kw)
    return LogRecord(**fields)


@pytest.mark.django_db
def test_rows_whose_account_provider_or_key_was_deleted_are_kept_with_the_reference_cleared() -> None:
    provider, gone_provider = make_provider("kept"), make_provider("gone")
    account, gone_account, orphaned = make_account(provider, "a"), make_account(provider, "b"), \
        make_account(gone_provider, "c")
    key, gone_key = make_key("kept"), make_key("gone")
    batch = [
        record("refs_live", provider, account, key, created_at=LONG_AGO),
        record("refs_no_account", provider, gone_account, key, created_at=LONG_AGO),
        record("refs_no_provider", gone_provider, orphaned, key, created_at=LONG_AGO),
        record("refs_no_key", provider, account, gone_key, created_at=LONG_AGO),
    ]
    gone_account.delete()
    gone_provider.delete()  # and its account with it
    gone_key.delete()

    LogWriter(sinks=log_sinks(settings))._write(batch)

    rows = logged("refs_")
    refs = {rid: (r.provider_id, r.account_id, r.client_key_id) for rid, r in rows.items()}
    assert refs == {
        "refs_live": (provider.pk, account.pk, key.pk),
        "refs_no_account": (provider.pk, None, key.pk),
        "refs_no_provider": (None, None, key.pk),
        "refs_no_key": (provider.pk, account.pk, None),
    }
    # No provider, no price table: no cost.
    assert {rid: r.cost for rid, r in rows.items()} == {
        "refs_live": ONE_REQUEST, "refs_no_account": ONE_REQUEST, "refs_no_provider": None, "refs_no_key": ONE_REQUEST}
    account.refresh_from_db()
    key.refresh_from_db()
    assert (account.requests, account.balance) == (2, Decimal("10") - 2 * ONE_REQUEST)
    assert key.requests == 3
    by_account = dict(UsageBucket.objects.filter(start=LONG_AGO_BUCKET).values_list("account_id", "requests"))
    assert by_account == {account.pk: 2, 0: 2}  # requests that lost their account count under 0


@pytest.mark.django_db
def test_attempts_read_back_as_the_dicts_the_request_page_shows() -> None:
    provider = make_provider("p")
    account, other = make_account(provider, "a"), make_account(provider, "b")
    key = make_key("k")
    attempts = [Attempt(other.pk, "b", 429, "retry", 12, "Límite de tasa — 速率限制 \"quoted\"\n", "tier3"),
                Attempt(None, "", None, "network", 0, "connect failed"),
                Attempt(account.pk, "a", 200, "ok", 80)]
    LogWriter(sinks=log_sinks(settings))._write([record("trace_traced", provider, account, key, attempts=attempts),
                        record("trace_untraced", provider, account, key)])

    traced = RequestLog.objects.get(request_id="trace_traced")
    assert traced.attempts == [asdict(a) for a in attempts] and traced.attempt_count == 3
    assert RequestLog.objects.get(request_id="trace_untraced").attempts == []
    # Stored as JSON the database understands, not just text that happens to parse.
    assert list(logged_rows("trace_").filter(attempts__0__verdict="retry").values_list("request_id", flat=True)) \
        == ["trace_traced"]


def test_an_attempt_error_with_a_lone_surrogate_is_still_encoded() -> None:
    # An upstream's JSON error message can decode to one; orjson refuses it, json escapes it.
    attempt = Attempt(1, "a", 500, "retry", 3, "bad \ud800 text")
    assert json.loads(_attempts_json([attempt])) == [asdict(attempt)]


@pytest.mark.django_db(transaction=True)
def test_a_record_the_database_refuses_does_not_hold_up_the_batch_and_keeps_its_row(
        one_account: tuple[Provider, Account, ApiKey], monkeypatch: pytest.MonkeyPatch) -> None:
    provider, account, key = one_account
    writer = writer_without_thread(monkeypatch)
    # A lone surrogate (SQLite cannot encode it) and a NUL byte (PostgreSQL will not store it).
    bad = record("refused_bad", provider, account, key, model_requested="gpt-\ud800", error_class="x\x00y",
                 attempts=[Attempt(account.pk, "a\ud800", 200, "ok", 5, error="e\x00")])
    for rec in (record("refused_1", provider, account, key), bad, record("refused_2", provider, account, key)):
        writer.submit(rec)
    assert writer.flush() == 3
    rows = logged("refused_")
    assert set(rows) == {"refused_1", "refused_bad", "refused_2"}
    assert rows["refused_bad"].model_requested == "gpt-?" and rows["refused_bad"].error_class == "xy"
    assert rows["refused_bad"].attempts[0]["account_label"] == "a?"
    account.refresh_from_db()
    assert account.requests == 3  # every request counted once, the refused one included


@pytest.mark.django_db(transaction=True)
def test_when_the_database_refuses_everything_the_records_wait_for_the_next_batch(
        one_account: tuple[Provider, Account, ApiKey], monkeypatch: pytest.MonkeyPatch) -> None:
    provider, account, key = one_account
    writer = writer_without_thread(monkeypatch)
    for i in range(3):
        writer.submit(record(f"req_down_{i}", provider, account, key))
    real_write = writer._write

    def down(batch: list[LogRecord]) -> None:
        raise OSError("database unavailable")

    monkeypatch.setattr(writer, "_write", down)
    with pytest.raises(RuntimeError):
        writer.flush()
    assert logged("req_down_") == {}
    monkeypatch.setattr(writer, "_write", real_write)
    assert writer.flush() == 3
    assert set(logged("req_down_")) == {"req_down_0", "req_down_1", "req_down_2"}
