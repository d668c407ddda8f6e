"""Conversations encrypted at rest: a copy of the database holds no stored answer, conversation item or
logged body in plain text, yet the gateway reads them all back; rotating the key loses nothing.

The attack: a database dump (a backup, a replica, a stolen disk) read with nothing else. Stored answers
and their input items, and request-log bodies with body logging on, were plain text in it, including
whatever secrets users typed into prompts.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

import atrest
from accounts.models import RequestLog
from conversations.models import StoredResponse
from tests.e2e.conftest import CLIENT_KEY
from tests.servers import Server, own_gateway

pytestmark = pytest.mark.django_db(transaction=True)

HEADERS = {"Authorization": f"Bearer {CLIENT_KEY}"}


def raw_rows(sql: str) -> list[tuple[Any, ...]]:
    """What a dump of the database holds: the columns as stored, no model field in between."""

    with connection.cursor() as cursor:
        cursor.execute(sql)
        return list(cursor.fetchall())


def stored_columns() -> list[str]:
    table = StoredResponse._meta.db_table
    return [value for row in raw_rows(f"SELECT input_items, response FROM {table}") for value in row]


def logged_bodies() -> list[str]:
    table = RequestLog._meta.db_table
    return [v for row in raw_rows(f"SELECT request_body, response_body FROM {table}") for v in row if v]


@pytest.fixture
def logging_gateway(pool: Any, django_db_blocker: Any) -> Iterator[Server]:
    with own_gateway(django_db_blocker, {"GATEWAY_LOG_BODIES": "1"}) as server:
        yield server


def ask(gateway: Server, **body: Any) -> dict[str, Any]:
    answer = httpx.post(gateway.url + "/v1/responses", json={"model": "up-openai_chat/mock-text", **body},
                        headers=HEADERS, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def wait_for_bodies(count: int, timeout: float = 10) -> list[str]:
    deadline = time.monotonic() + timeout
    while len(bodies := logged_bodies()) < count and time.monotonic() < deadline:
        time.sleep(0.1)
    return bodies


def test_a_database_dump_holds_no_conversation_or_logged_body_in_plain_text(logging_gateway: Server) -> None:
    typed = f"my bank password is hunter-{uuid.uuid4().hex}"
    first = ask(logging_gateway, input=typed)
    follow = ask(logging_gateway, input="what did I tell you?", previous_response_id=first["id"])
    chat = httpx.post(logging_gateway.url + "/v1/chat/completions", headers=HEADERS, timeout=30, json={
        "model": "up-openai_chat/mock-text", "messages": [{"role": "user", "content": typed}]})
    assert chat.status_code == 200

    columns = stored_columns()
    bodies = wait_for_bodies(6)  # three requests, each its request and its response
    assert len(columns) >= 4 and len(bodies) >= 6
    for value in columns + bodies:
        assert value.startswith(atrest.PREFIX), value[:80]
        assert "hunter-" not in value and "Hello" not in value and '"role"' not in value
    # The gateway reads it all back: the answer, its input, the conversation a follow-up continues.
    got = httpx.get(f"{logging_gateway.url}/v1/responses/{first['id']}", headers=HEADERS).json()
    assert got["output"] == first["output"]
    items = httpx.get(f"{logging_gateway.url}/v1/responses/{follow['id']}/input_items", headers=HEADERS).json()
    assert any(typed in str(item) for item in items["data"])
    assert any(typed in r.request_body for r in RequestLog.objects.exclude(request_body=""))  # and the log


def test_rows_kept_before_encryption_are_encrypted_by_the_migration_and_read_as_they_were(db: Any) -> None:
    table = StoredResponse._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} (response_id, client_key_id, previous_response_id, model, "
                       "upstream_protocol, provider_id, account_id, upstream_response_id, input_items, response, "
                       "created_at) VALUES ('resp_old', 1, '', 'm', 'openai_chat', NULL, NULL, '', "
                       "'[{\"role\": \"user\", \"content\": \"plain secret\"}]', '{\"id\": \"resp_old\"}', "
                       "CURRENT_TIMESTAMP)")
    assert StoredResponse.objects.get(response_id="resp_old").input_items.startswith("[")  # read as it was
    from importlib import import_module

    from django.apps import apps

    import_module("conversations.migrations.0003_encrypted_at_rest").encrypt_rows(apps, None)
    raw = stored_columns()
    assert raw and all(v.startswith(atrest.PREFIX) and "plain secret" not in v for v in raw)
    assert "plain secret" in StoredResponse.objects.get(response_id="resp_old").input_items


def test_a_rotated_key_reads_what_the_old_one_wrote_and_reencrypt_retires_it(db: Any) -> None:
    with override_settings(GATEWAY_ENCRYPTION_KEY="key-one", GATEWAY_ENCRYPTION_OLD_KEYS=[]):
        StoredResponse.objects.create(response_id="resp_rot", client_key_id=1, input_items='["the plan"]',
                                      response="{}", created_at="2026-01-01T00:00:00Z")
    with override_settings(GATEWAY_ENCRYPTION_KEY="key-two", GATEWAY_ENCRYPTION_OLD_KEYS=["key-one"]):
        assert StoredResponse.objects.get(response_id="resp_rot").input_items == '["the plan"]'
        call_command("reencrypt", stdout=open("/dev/null", "w"))
    with override_settings(GATEWAY_ENCRYPTION_KEY="key-two", GATEWAY_ENCRYPTION_OLD_KEYS=[]):
        assert StoredResponse.objects.get(response_id="resp_rot").input_items == '["the plan"]'
    with override_settings(GATEWAY_ENCRYPTION_KEY="key-one", GATEWAY_ENCRYPTION_OLD_KEYS=[]):
        with pytest.raises(atrest.Unreadable):
            StoredResponse.objects.get(response_id="resp_rot")
