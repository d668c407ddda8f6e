"""Per-key request-rate and daily-token limits: 429 in the caller's envelope with Retry-After."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.db import connection
from django.test import override_settings

from accounts.config_file import load
from gateway.errors import RateLimited
from gateway.ratelimit import WINDOW_SECONDS, Limits
from gateway.state import KeyInfo
from tests.e2e.conftest import pool_config
from tests.hardening.envelope import CHAT, MSGS, RESP, check_error_envelope
from tests.servers import Server, database_url, free_port, gateway_processes

pytestmark = pytest.mark.django_db(transaction=True)

BODIES = {
    CHAT: {"model": "up-openai_chat/mock-text", "messages": [{"role": "user", "content": "hi"}]},
    MSGS: {"model": "up-anthropic/mock-text", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]},
    RESP: {"model": "up-responses/mock-text", "input": "hi"},
}


def limited_key(mock: Server, **limits: Any) -> str:
    """A fresh client key (its own name, so no counter of an earlier test applies) with ``limits``."""

    plain = f"gw-limited-{uuid.uuid4().hex}"
    config = pool_config(mock)
    config["client_keys"].append({"name": plain[-12:], "key": plain, **limits})
    load(config)
    return plain


def call(url: str, path: str, key: str) -> httpx.Response:
    return httpx.post(url + path, json=BODIES[path], headers={"authorization": f"Bearer {key}"}, timeout=30)


def wait_for_fresh_window(needed: float = 10.0) -> None:
    """Sleep past a minute boundary that would fall inside the next ``needed`` seconds."""

    left = WINDOW_SECONDS - time.time() % WINDOW_SECONDS
    if left < needed:
        time.sleep(left + 0.2)


def assert_rate_limited(path: str, resp: httpx.Response, most: int) -> None:
    assert resp.status_code == 429
    body = check_error_envelope(path, resp.status_code, resp.headers, resp.content)
    assert body["error"]["type"] == "rate_limit_error"
    assert 1 <= int(resp.headers["retry-after"]) <= most


@pytest.mark.parametrize("path", [CHAT, MSGS, RESP])
def test_requests_over_the_per_minute_limit_get_429_with_retry_after(pool: Any, gateway: Server,
                                                                    mock_upstream: Server, path: str) -> None:
    key = limited_key(mock_upstream, rate_limit_per_minute=3)
    wait_for_fresh_window()
    answers = [call(gateway.url, path, key) for _ in range(5)]
    assert [r.status_code for r in answers] == [200, 200, 200, 429, 429]
    for resp in answers[3:]:
        assert_rate_limited(path, resp, WINDOW_SECONDS)


def test_keys_without_limits_and_other_keys_are_not_held_back(pool: Any, gateway: Server,
                                                              mock_upstream: Server) -> None:
    limited = limited_key(mock_upstream, rate_limit_per_minute=1)
    free = limited_key(mock_upstream)
    wait_for_fresh_window()
    assert call(gateway.url, CHAT, limited).status_code == 200
    assert call(gateway.url, CHAT, limited).status_code == 429
    assert all(call(gateway.url, CHAT, free).status_code == 200 for _ in range(5))


@pytest.mark.slow  # waits seconds for the log writer's batch and the token count's cache
def test_a_key_over_its_daily_tokens_gets_429_until_midnight_utc(pool: Any, gateway: Server,
                                                                 mock_upstream: Server) -> None:
    key = limited_key(mock_upstream, daily_token_limit=15)  # each answer is ~7 tokens
    statuses = []
    deadline = time.monotonic() + 20  # the log writer and the usage cache lag a few seconds
    while time.monotonic() < deadline:
        resp = call(gateway.url, CHAT, key)
        statuses.append(resp.status_code)
        if resp.status_code == 429:
            break
        time.sleep(0.5)
    assert statuses[-1] == 429, statuses
    assert statuses.count(200) >= 3  # 15 tokens take three answers
    now = time.time()
    assert_rate_limited(CHAT, resp, 86_400)
    assert abs(now + int(resp.headers["retry-after"]) - (now // 86_400 + 1) * 86_400) < 5
    assert_rate_limited(MSGS, call(gateway.url, MSGS, key), 86_400)  # every protocol, its own envelope


@pytest.fixture
def two_gateways_on_redis(pool: Any, django_db_blocker: Any) -> Iterator[tuple[Server, Server]]:
    redis_url = os.environ.get("REDIS_URL", "")
    if not redis_url.startswith("redis://"):
        pytest.skip("REDIS_URL is not set to a Redis server: the shared rate counter needs one")
    url = database_url(connection.settings_dict)
    with gateway_processes(url, 2, {"REDIS_URL": redis_url}) as (first, second):
        yield first, second


def test_the_request_rate_is_shared_by_gateway_processes_through_redis(
        two_gateways_on_redis: tuple[Server, Server], mock_upstream: Server) -> None:
    first, second = two_gateways_on_redis
    key = limited_key(mock_upstream, rate_limit_per_minute=4)
    wait_for_fresh_window()
    statuses = [call(gw.url, CHAT, key).status_code for gw in (first, second) * 4]
    assert statuses.count(200) == 4, statuses  # counted per process, 8 would pass


def test_with_redis_unreachable_the_limit_is_still_kept_in_process() -> None:
    key = KeyInfo(id=1, name="k", allowed_models=(), rate_limit_per_minute=2, daily_token_limit=None)
    with override_settings(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0"):
        wait_for_fresh_window(5)
        limits = Limits()

        async def three() -> None:
            await limits.check(key)
            await limits.check(key)
            with pytest.raises(RateLimited) as info:
                await limits.check(key)
            assert 1 <= int(info.value.headers["Retry-After"]) <= WINDOW_SECONDS

        asyncio.run(three())
