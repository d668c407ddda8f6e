"""Requests refused for their key (401) or its limits (429) are in the request log, each with its own
error class and the limit named to the client, and the key presented is nowhere in the row."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from django.forms.models import model_to_dict

from accounts.config_file import load
from accounts.models import RequestLog
from tests.servers import Server, seen

pytestmark = pytest.mark.django_db(transaction=True)

WRONG_KEY = "gw-not-a-key-of-ours-7f3a9c"
RATE_KEY = "gw-e2e-one-a-minute-51d2"
BUDGET_KEY = "gw-e2e-ten-tokens-a-day-8e41"
BODY = {"model": "up-openai_chat/mock-text", "messages": [{"role": "user", "content": "hello there " * 20}]}


def post(gateway: Server, key: str) -> httpx.Response:
    return httpx.post(f"{gateway.url}/v1/chat/completions", json=BODY, headers={"Authorization": f"Bearer {key}"},
                      timeout=10)


def rows(status: int, count: int) -> list[RequestLog]:
    deadline = time.monotonic() + 10
    while True:
        found = list(RequestLog.objects.filter(status=status).exclude(client_key_name="seen").order_by("id"))
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def stored(row: RequestLog) -> str:
    return repr(model_to_dict(row))


def test_a_wrong_key_is_logged_as_a_401_without_the_key(pool: dict[str, Any], gateway: Server) -> None:
    answer = post(gateway, WRONG_KEY)
    assert answer.status_code == 401 and WRONG_KEY not in answer.text
    [row] = rows(401, 1)
    assert row.error_class == "authentication_failed" and row.client_key_id is None
    assert WRONG_KEY not in stored(row) and WRONG_KEY[-6:] not in stored(row)


def test_a_deactivated_key_is_refused_like_a_wrong_one_and_logged_under_its_name(
        pool: dict[str, Any], gateway: Server) -> None:
    revoked = "gw-e2e-revoked-key-4c1d2e"
    load({"client_keys": [{"name": "left-the-team", "key": revoked, "active": False}]})
    seen(gateway)
    answer, wrong = post(gateway, revoked), post(gateway, WRONG_KEY)
    assert answer.status_code == wrong.status_code == 401
    assert answer.json()["error"]["message"] == wrong.json()["error"]["message"]  # the client learns nothing more
    named, unknown = sorted(rows(401, 2), key=lambda r: r.client_key_name, reverse=True)
    assert (named.client_key_name, named.client_key.name, named.error_class) == (
        "left-the-team", "left-the-team", "authentication_failed")
    assert (unknown.client_key_name, unknown.client_key_id) == ("", None)
    for row in (named, unknown):
        assert revoked not in stored(row) and revoked[-6:] not in stored(row) and WRONG_KEY not in stored(row)


def test_each_limit_is_named_to_the_client_and_logged_apart_without_the_key(pool: dict[str, Any],
                                                                             gateway: Server) -> None:
    load({"client_keys": [{"name": "one-a-minute", "key": RATE_KEY, "rate_limit_per_minute": 1},
                          {"name": "ten-tokens", "key": BUDGET_KEY, "daily_token_limit": 10}]})
    seen(gateway)
    assert post(gateway, RATE_KEY).status_code == 200
    refused = post(gateway, RATE_KEY)
    assert refused.status_code == 429 and "1 requests per minute" in refused.json()["error"]["message"]
    # The first request may pass on its estimate; the tokens it used (over 50) leave nothing for the next.
    for _ in range(20):
        over = post(gateway, BUDGET_KEY)
        if over.status_code != 200:
            break
        time.sleep(0.2)
    assert over.status_code == 429 and "10 tokens" in over.json()["error"]["message"]
    by_key = {row.client_key_name: row for row in rows(429, 2)}
    assert by_key["one-a-minute"].error_class == "rate_limited"
    assert by_key["ten-tokens"].error_class == "budget_exceeded"
    for key, row in ((RATE_KEY, by_key["one-a-minute"]), (BUDGET_KEY, by_key["ten-tokens"])):
        assert key not in stored(row) and key[-6:] not in stored(row)
