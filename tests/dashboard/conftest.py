"""Dashboard fixtures: staff users, log rows written the way the gateway writes them, and the e2e servers."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from accounts.models import Account, ApiKey, Provider
from gateway.app import log_sinks
from gateway.log import writer as reqlog
from tests.e2e.conftest import gateway, mock_upstream, pool  # noqa: F401 - fixtures shared with e2e

PASSWORD = "staff-password-for-tests"


@pytest.fixture
def staff(db: Any) -> User:
    # No password: tests log in with force_login, and hashing one costs half a second.
    return User.objects.create_user("ops", "ops@example.com", None, is_staff=True)


@pytest.fixture
def staff_client(staff: User) -> Client:
    client = Client()
    client.force_login(staff)
    return client


@pytest.fixture
def provider(db: Any) -> Provider:
    return Provider.objects.create(name="up-chat", protocol="openai_chat", base_url="http://127.0.0.1:9/v1")


def make_account(provider: Provider, label: str, **kw: Any) -> Account:
    account = Account(provider=provider, label=label, **kw)
    account.set_secret(f"sk-test-{label}-{uuid.uuid4().hex}")
    account.save()
    return account


def make_key(name: str = "team-a") -> ApiKey:
    key = ApiKey(name=name)
    key.set_key(f"gw-{uuid.uuid4().hex}")
    key.save()
    return key


def record(account: Account | None = None, *, ago: dt.timedelta = dt.timedelta(0), status: int = 200,
           ttfb_ms: int | None = 120, **kw: Any) -> reqlog.LogRecord:
    """One finished request as the dispatch loop hands it to the log writer."""

    attempts = [reqlog.Attempt(account.pk, account.label, status, "ok" if status < 400 else "return", 30)] if account else []
    fields: dict[str, Any] = {
        "request_id": f"req_{uuid.uuid4().hex}", "client_protocol": "openai_chat", "upstream_protocol": "openai_chat",
        "provider_id": account.provider_id if account else None, "account_id": account.pk if account else None,
        "model_requested": "gpt-test", "model_sent": "gpt-test", "status": status, "attempts": attempts,
        "latency_ms": 200, "ttfb_ms": ttfb_ms if status < 400 else None, "input_tokens": 10, "output_tokens": 5,
        "created_at": timezone.now() - ago,
    }
    fields.update(kw)
    return reqlog.LogRecord(**fields)


def write(records: list[reqlog.LogRecord]) -> None:
    """Through the writer's own batch path (rows, counters and usage buckets), in this thread."""

    reqlog.LogWriter(sinks=log_sinks(settings))._write(records)
