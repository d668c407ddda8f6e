"""A client key's life, from outside: rotated in the gateway's admin (both secrets served, then the old
one refused once the grace the operator chose is over), expired, its last use shown, deactivated in
bulk. Each refusal is a 401 in the caller's envelope that names the key in the request log.

The gateway runs with production's TTLs (configuration cached, re-read in the background), so what
the next request sees right after an admin action is the action's own doing (the configuration's
version, ``accounts.configversion``); expiry and the end of a grace need no change at all: the time
is compared on each request.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.forms.models import model_to_dict
from django.test import Client
from django.utils import timezone

from accounts.config_file import load
from accounts.formats import short_when, when
from accounts.models import ApiKey, RequestLog
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.e2e.keyadmin import chat, key_action, message, revealed_secrets
from tests.e2e.test_changes_take_effect import staff_session
from tests.servers import PRODUCTION_TTLS, Server, database_url, gateway_processes, seen

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ready(transactional_db: Any, mock_upstream: Server, production_gateway: Server) -> Server:
    load(pool_config(mock_upstream))
    seen(production_gateway)
    assert production_gateway.config_ttl >= 1.0  # production's: only the change's own signal explains what follows
    return production_gateway


def new_key(name: str) -> tuple[ApiKey, str]:
    plain = f"gw-life-{uuid.uuid4().hex}"
    load({"client_keys": [{"name": name, "key": plain}]})
    return ApiKey.objects.get(name=name), plain


def refusals(key: ApiKey, count: int) -> list[RequestLog]:
    """The key's 401 rows once ``count`` of them are written (the log is written a batch behind)."""

    deadline = time.monotonic() + 10
    while True:
        rows = list(RequestLog.objects.filter(client_key=key, status=401).order_by("id"))
        if len(rows) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


def wait_past(moment: dt.datetime) -> None:
    time.sleep(max(0.0, (moment - timezone.now()).total_seconds()) + 0.2)


def test_a_rotated_key_serves_both_secrets_then_refuses_the_old_one_after_the_grace(ready: Server) -> None:
    key = ApiKey.objects.get(name="e2e")
    old = CLIENT_KEY
    assert chat(ready, old)[0] == 200
    page = key_action(ready, staff_session(), "rotate_keys", [key], grace_hours="1")
    [new] = revealed_secrets(page)
    assert new != old and 'class="button copy-key"' in page and "keeps working until" in page
    key.refresh_from_db()
    assert key.previous_key_hint == f"gw-…{old[-4:]}" and key.key_hint == f"gw-…{new[-4:]}"
    # At once: the new secret and the old one, on the very next requests, in either protocol.
    assert chat(ready, new)[0] == 200 and chat(ready, old)[0] == 200
    assert message(ready, new)[0] == 200 and message(ready, old)[0] == 200

    # The grace is the operator's to choose: edited down to a moment, the old secret is refused after it.
    key.previous_key_until = timezone.now() + dt.timedelta(seconds=2)
    key.save()
    assert chat(ready, old)[0] == 200
    wait_past(key.previous_key_until)
    status, said = chat(ready, old)
    assert status == 401 and said.startswith("This API key was rotated: the secret sent stopped working at ")
    status, said, _ = message(ready, old)
    assert status == 401 and said.startswith("authentication_error: This API key was rotated")
    assert chat(ready, new)[0] == 200 and message(ready, new)[0] == 200

    rows = refusals(key, 2)
    assert [(r.client_key_name, r.error_class) for r in rows] == [("e2e", "authentication_failed")] * 2
    for row in rows:
        stored = repr(model_to_dict(row))
        assert old not in stored and new not in stored and old[-6:] not in stored


def test_a_key_past_its_expiry_is_refused_with_a_clear_message_in_each_envelope(ready: Server) -> None:
    key, plain = new_key("expiring")
    key.expires_at = timezone.now() + dt.timedelta(seconds=2)
    key.save()
    assert chat(ready, plain)[0] == 200
    wait_past(key.expires_at)
    status, said = chat(ready, plain)
    assert status == 401 and said.startswith("This API key expired at ") and said.endswith(
        ": ask your gateway's administrators for a new one")
    status, said, response = message(ready, plain)
    assert status == 401 and said.startswith("authentication_error: This API key expired at ")
    assert response.headers["x-should-retry"] == "false"
    assert [r.client_key_name for r in refusals(key, 2)] == ["expiring", "expiring"]
    key.expires_at = timezone.now() + dt.timedelta(days=30)  # extended: served again at once
    key.save()
    assert chat(ready, plain)[0] == 200


def test_a_keys_last_use_is_stamped_and_shown_after_a_request(ready: Server) -> None:
    key, plain = new_key("stamped")
    assert key.last_used_at is None
    before = timezone.now()
    assert chat(ready, plain)[0] == 200
    deadline = time.monotonic() + 10
    while key.last_used_at is None and time.monotonic() < deadline:  # the log writer stamps it with its batch
        time.sleep(0.05)
        key.refresh_from_db()
    assert key.last_used_at is not None and key.last_used_at >= before - dt.timedelta(seconds=1)

    staff = Client()
    staff.force_login(_superuser())
    listing = staff.get("/admin/accounts/apikey/?q=stamped").content.decode()
    assert short_when(key.last_used_at) in listing
    assert when(key.last_used_at) in staff.get(f"/admin/accounts/apikey/{key.pk}/change/").content.decode()

    # A refused request is not a use.
    used = key.last_used_at
    key.active = False
    key.save()
    assert chat(ready, plain)[0] == 401
    refusals(key, 1)
    key.refresh_from_db()
    assert key.last_used_at == used


def test_keys_deactivated_in_bulk_are_refused_from_their_next_request(ready: Server) -> None:
    (a, plain_a), (b, plain_b), (_, plain_c) = new_key("bulk-a"), new_key("bulk-b"), new_key("bulk-c")
    assert [chat(ready, p)[0] for p in (plain_a, plain_b, plain_c)] == [200, 200, 200]
    page = key_action(ready, staff_session(), "deactivate_keys", [a, b])
    assert "Deactivated 2 key(s)" in page
    assert [chat(ready, p)[0] for p in (plain_a, plain_b, plain_c)] == [401, 401, 200]
    assert {r.client_key_name for r in refusals(a, 1) + refusals(b, 1)} == {"bulk-a", "bulk-b"}
    page = key_action(ready, staff_session(), "activate_keys", [a])
    assert "Activated 1 key(s)" in page and chat(ready, plain_a)[0] == 200


def _superuser() -> Any:
    from django.contrib.auth.models import User

    return User.objects.create_superuser(f"ops-{uuid.uuid4().hex[:6]}", "ops@example.com", "unused-password")


@pytest.fixture
def two_gateways(transactional_db: Any, mock_upstream: Server) -> Iterator[tuple[Server, Server]]:
    """Two gateway processes on the test database, with production's TTLs (on PostgreSQL each hears of
    a change by LISTEN/NOTIFY, on SQLite by reading the version row on the request)."""

    with gateway_processes(database_url(connection.settings_dict), 2, dict(PRODUCTION_TTLS)) as (a, b):
        load(pool_config(mock_upstream))
        seen(a, b)
        yield a, b


def test_a_rotation_and_a_bulk_deactivation_through_one_process_apply_on_the_others_next_request(
        two_gateways: tuple[Server, Server]) -> None:
    a, b = two_gateways
    cookies = staff_session()
    key = ApiKey.objects.get(name="e2e")
    assert chat(b, CLIENT_KEY)[0] == 200
    [new] = revealed_secrets(key_action(a, cookies, "rotate_keys", [key], grace_hours="0"))
    # A grace of 0: the other process takes the new secret and refuses the old one at once.
    assert chat(b, new)[0] == 200
    status, said = chat(b, CLIENT_KEY)
    assert status == 401 and "rotated" in said
    key_action(a, cookies, "deactivate_keys", [key])
    assert chat(b, new)[0] == 401
