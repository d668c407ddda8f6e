"""Per-key limits from outside, against real gateway processes: model patterns, request rate, tokens per
rolling 24 hours reserved before dispatch, concurrency caps; refusals are 429 (403) in the caller's envelope."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from django.db import connection

from accounts.config_file import load
from gateway.errors import RateLimited
from gateway.limits import WINDOW_SECONDS, Limits
from accounts.budgetwindows import DAY
from gateway.state import KeyInfo
from tests.e2e import clients
from tests.e2e.conftest import pool_config
from tests.hardening.envelope import CHAT, COUNT, MSGS, RESP, check_error_envelope
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
def test_a_key_over_its_daily_tokens_gets_429_until_they_leave_the_rolling_24_hours(
        pool: Any, gateway: Server, mock_upstream: Server) -> None:
    key = limited_key(mock_upstream, daily_token_limit=15)  # each answer is ~7 tokens
    started = time.time()
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
    assert_rate_limited(CHAT, resp, DAY.seconds + DAY.width)
    # Freed when the half-hour slice the tokens were spent in has left the window (they may straddle two).
    frees = {DAY.out_at(DAY.slice_of(t)) for t in (started, now)}
    assert any(abs(now + int(resp.headers["retry-after"]) - t) < 5 for t in frees), (frees, resp.headers)
    assert "in the last 24 hours" in resp.json()["error"]["message"]
    assert_rate_limited(MSGS, call(gateway.url, MSGS, key), DAY.seconds + DAY.width)  # every protocol, its envelope


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
    wait_for_fresh_window(5)
    limits = Limits(f"redis://127.0.0.1:{free_port()}/0")

    async def three() -> None:
        await limits.check_rate(key)
        await limits.check_rate(key)
        with pytest.raises(RateLimited) as info:
            await limits.check_rate(key)
        assert 1 <= int(info.value.headers["Retry-After"]) <= WINDOW_SECONDS
        await limits.aclose()

    asyncio.run(three())


# ---------------------------------------------------------------- limits that mean what they say


def stream_body(model: str = "up-anthropic/mock-slow-20x100", max_tokens: int = 20) -> dict[str, Any]:
    return {"model": model, "max_tokens": max_tokens, "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}


def served_tokens(resp: httpx.Response) -> int:
    """Input + output tokens an Anthropic stream reported (0 for a refusal)."""

    if resp.status_code != 200:
        return 0
    usage: dict[str, int] = {}
    for line in resp.text.splitlines():
        if line.startswith("data: "):
            event = orjson.loads(line[6:])
            usage.update(event.get("usage") or event.get("message", {}).get("usage") or {})
    return usage.get("input_tokens", 0) + usage.get("output_tokens", 0)


async def concurrent_streams(urls: list[str], key: str, count: int, body: dict[str, Any]) -> list[httpx.Response]:
    """``count`` streams started together, spread over ``urls``, each read to its end."""

    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=count)) as client:
        return await asyncio.gather(*(
            client.post(urls[i % len(urls)] + MSGS, json=body, headers={"x-api-key": key})
            for i in range(count)))


def assert_refused(resp: httpx.Response, *words: str) -> None:
    assert_rate_limited(MSGS, resp, DAY.seconds + DAY.width)
    message = resp.json()["error"]["message"]
    assert all(w in message for w in words), message


def test_a_key_pattern_without_a_slash_does_not_reach_provider_routes(pool: Any, gateway: Server,
                                                                     mock_upstream: Server) -> None:
    config = pool_config(mock_upstream)
    config["providers"].append({**config["providers"][0], "name": "acc-chat"})
    config["aliases"] = [{"name": "acc-chat-2", "provider": "up-openai_chat", "model": "mock-text"}]
    load(config)
    key = limited_key(mock_upstream, allowed_models=["acc-*"])
    headers = {"authorization": f"Bearer {key}"}
    hi = [{"role": "user", "content": "hi"}]
    refused = httpx.post(gateway.url + CHAT, headers=headers, json={"model": "acc-chat/mock-text", "messages": hi})
    assert refused.status_code == 403
    assert check_error_envelope(CHAT, 403, refused.headers, refused.content)["error"]["type"] == "permission_error"
    allowed = httpx.post(gateway.url + CHAT, headers=headers, json={"model": "acc-chat-2", "messages": hi})
    assert allowed.status_code == 200, allowed.text
    # The same rule on count_tokens, in the Anthropic envelope.
    counted = httpx.post(gateway.url + COUNT, headers={"x-api-key": key},
                         json={"model": "acc-chat/mock-text", "messages": hi})
    assert counted.status_code == 400  # a denied model, in Anthropic's table
    assert check_error_envelope(COUNT, 400, counted.headers, counted.content)["error"]["type"] == "invalid_request_error"
    assert httpx.post(gateway.url + COUNT, headers={"x-api-key": key},
                      json={"model": "acc-chat-2", "messages": hi}).status_code == 200


def test_count_tokens_keeps_to_the_keys_models_and_rate(pool: Any, gateway: Server, mock_upstream: Server) -> None:
    key = limited_key(mock_upstream, allowed_models=["up-anthropic/*"], rate_limit_per_minute=3)
    wait_for_fresh_window()
    hi = [{"role": "user", "content": "hi"}]

    def count(model: str) -> httpx.Response:
        return httpx.post(gateway.url + COUNT, headers={"x-api-key": key}, json={"model": model, "messages": hi})

    forbidden = count("up-openai_chat/mock-text")
    assert forbidden.status_code == 400  # a denied model, in Anthropic's table
    check_error_envelope(COUNT, 400, forbidden.headers, forbidden.content)
    assert [count("up-anthropic/mock-text").status_code for _ in range(2)] == [200, 200]
    limited = count("up-anthropic/mock-text")
    assert_rate_limited(COUNT, limited, WINDOW_SECONDS)


def test_the_model_list_shows_a_key_only_its_models(pool: Any, gateway: Server, mock_upstream: Server) -> None:
    config = pool_config(mock_upstream)
    config["aliases"] = [{"name": "acc-chat-2", "provider": "up-openai_chat", "model": "mock-text"},
                         {"name": "other-model", "provider": "up-openai_chat", "model": "mock-text"}]
    load(config)
    # The upstream's own names route as provider/name (no alias names them bare); "mock-t*" alone
    # would not reach them, its "*" never crossing the "/".
    restricted = limited_key(mock_upstream, allowed_models=["acc-*", "mock-t*", "up-openai_chat/mock-t*"])
    everything = limited_key(mock_upstream)
    listed = {m.id for m in clients.openai_client(gateway.url, restricted).models.list()}
    assert listed == {"acc-chat-2", "up-openai_chat/mock-text", "up-openai_chat/mock-tool",
                      "up-openai_chat/mock-truncated"}
    assert {"acc-chat-2", "other-model", "up-openai_chat/mock-long", "up-anthropic/mock-long"} <= {
        m.id for m in clients.openai_client(gateway.url, everything).models.list()}


def test_a_burst_of_streams_overshoots_a_daily_token_limit_by_one_request_at_most(
        pool: Any, gateway: Server, mock_upstream: Server) -> None:
    # Each stream reserves its input (~4) + max_tokens (20) and is served 21 tokens over 2 s. Before
    # reservations all 30 were served (630 tokens): the limit read a log written a second later.
    key = limited_key(mock_upstream, daily_token_limit=40)
    answers = asyncio.run(concurrent_streams([gateway.url], key, 30, stream_body()))
    served = [served_tokens(r) for r in answers if r.status_code == 200]
    assert served and sum(served) - 40 <= max(served), served
    assert len(served) + sum(r.status_code == 429 for r in answers) == 30
    for resp in answers:
        if resp.status_code == 429:  # refused for what is reserved in flight, or (late) for what was used
            assert_refused(resp, "40 tokens")
    assert any("reserved by requests in flight" in r.json()["error"]["message"] for r in answers
               if r.status_code == 429)
    later = httpx.post(gateway.url + MSGS, json=stream_body(), headers={"x-api-key": key})
    assert_refused(later, "used its 40 tokens in the last 24 hours", "UTC")


def test_at_most_the_concurrency_cap_is_served_at_once_and_slots_come_back(
        pool: Any, gateway: Server, mock_upstream: Server) -> None:
    key = limited_key(mock_upstream, max_concurrent_requests=3)
    answers = asyncio.run(concurrent_streams([gateway.url], key, 8, stream_body()))
    assert sorted(r.status_code for r in answers) == [200] * 3 + [429] * 5
    assert all(served_tokens(r) == 21 for r in answers if r.status_code == 200)
    for resp in answers:
        if resp.status_code == 429:
            assert_refused(resp, "limited to 3 concurrent requests")
    # Slots come back when the streams end, whether the client read to the end or hung up halfway.
    with httpx.Client(timeout=30) as client:
        for _ in range(3):
            with client.stream("POST", gateway.url + MSGS, json=stream_body(), headers={"x-api-key": key}) as r:
                assert r.status_code == 200
                next(r.iter_raw())
    deadline = time.monotonic() + 5
    while True:
        answers = asyncio.run(concurrent_streams([gateway.url], key, 4, stream_body("up-anthropic/mock-text")))
        statuses = sorted(r.status_code for r in answers)
        if statuses == [200] * 3 + [429] or time.monotonic() > deadline:
            break
        time.sleep(0.2)  # the gateway hears of a hang-up when its next write fails
    assert statuses == [200] * 3 + [429]


def test_two_processes_share_the_concurrency_cap_and_the_token_reservations(
        two_gateways_on_redis: tuple[Server, Server], mock_upstream: Server) -> None:
    urls = [gw.url for gw in two_gateways_on_redis]
    capped = limited_key(mock_upstream, max_concurrent_requests=2)
    answers = asyncio.run(concurrent_streams(urls, capped, 6, stream_body()))
    assert sorted(r.status_code for r in answers) == [200] * 2 + [429] * 4  # per process, 4 would pass
    budget = limited_key(mock_upstream, daily_token_limit=40)
    answers = asyncio.run(concurrent_streams(urls, budget, 20, stream_body()))
    served = [served_tokens(r) for r in answers if r.status_code == 200]
    # Shared: one request's worth over in all, where each process counting alone would serve ~4 streams.
    assert served and sum(served) - 40 <= max(served), served


@pytest.fixture
def own_redis() -> Iterator[int]:
    """A Redis server of this test's own (so freezing it holds up nobody else); its port."""

    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--enable-debug-command", "local"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).stdout != b"PONG\n":
            assert time.monotonic() < deadline and proc.poll() is None, "redis-server did not start"
            time.sleep(0.1)
        yield port
    finally:
        proc.kill()  # frozen in DEBUG SLEEP it would finish the sleep before a SIGTERM
        proc.wait()


async def rate_limited_load(url: str, key: str, seconds: float, clients: int) -> list[int]:
    """Statuses of ``clients`` callers asking one after another for ``seconds``."""

    statuses: list[int] = []
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient(timeout=30) as client:
        async def caller() -> None:
            while time.monotonic() < deadline:
                resp = await client.post(url + CHAT, json=BODIES[CHAT], headers={"authorization": f"Bearer {key}"})
                statuses.append(resp.status_code)

        await asyncio.gather(*(caller() for _ in range(clients)))
    return statuses


def test_a_frozen_redis_costs_one_timeout_not_one_per_request(pool: Any, mock_upstream: Server,
                                                              own_redis: int) -> None:
    key = limited_key(mock_upstream, rate_limit_per_minute=1_000_000)
    url = database_url(connection.settings_dict)
    clients, seconds = 8, 5.0
    with gateway_processes(url, 1, {"REDIS_URL": f"redis://127.0.0.1:{own_redis}/0"}) as (gw,):
        live = asyncio.run(rate_limited_load(gw.url, key, 2.0, clients))
        sleeper = subprocess.Popen(["redis-cli", "-p", str(own_redis), "DEBUG", "SLEEP", "10"],
                                   stdout=subprocess.DEVNULL)
        try:
            time.sleep(0.2)
            frozen = asyncio.run(rate_limited_load(gw.url, key, seconds, clients))
        finally:
            sleeper.kill()
            sleeper.wait()
    print(f"\nrate-limited requests: {len(live) / 2.0:.0f}/s with Redis up, "
          f"{len(frozen) / seconds:.0f}/s with it frozen ({clients} clients)")
    assert set(live) == {200} and set(frozen) == {200}
    # Without the breaker each request waited out the 1 s socket timeout: at most clients × seconds.
    assert len(frozen) >= 5 * clients * seconds
