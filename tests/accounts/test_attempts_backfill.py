"""The migration that adds RequestAttempt finds the attempts of the rows already logged in their JSON trace."""

from __future__ import annotations

import importlib
import uuid
from types import SimpleNamespace

import pytest
from django.db import connection
from django.utils import timezone

from accounts.models import Account, Provider, RequestAttempt, RequestLog

pytestmark = pytest.mark.django_db

migration = importlib.import_module("accounts.migrations.0028_request_attempts")


def test_the_backfill_reads_every_attempt_and_the_account_of_a_row_without_a_trace() -> None:
    provider = Provider.objects.create(name="p", protocol="openai_chat", base_url="http://127.0.0.1:9/v1")
    a, b = (Account.objects.create(provider=provider, label=label, secret_encrypted="x") for label in ("a", "b"))
    now = timezone.now()

    def row(**kw: object) -> RequestLog:
        return RequestLog.objects.create(request_id=f"req_{uuid.uuid4().hex}", client_protocol="openai_chat",
                                         created_at=now, status=200, **kw)

    retried = row(account=b, attempts=[{"account_id": a.pk, "verdict": "retry", "status": 429},
                                       {"account_id": b.pk, "verdict": "ok", "status": 200},
                                       {"account_id": 999_999, "verdict": "retry", "status": 500}])  # deleted account
    bare = row(account=a, attempts=[])
    row(attempts=[])  # reached no account
    migration.backfill(None, SimpleNamespace(connection=connection))  # all it reads of the schema editor
    got = sorted(RequestAttempt.objects.values_list("request_id", "account_id", "verdict", "status"))
    assert got == sorted([(retried.pk, a.pk, "retry", 429), (retried.pk, b.pk, "ok", 200), (bare.pk, a.pk, "", None)])
