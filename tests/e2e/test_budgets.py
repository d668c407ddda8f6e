"""USD budgets from outside, through the official SDKs: a key is served until its budget is spent, then
refused with 429 in the caller's envelope, a message naming the budget and a Retry-After until it frees."""

from __future__ import annotations

import datetime as dt
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from django.db import connection

from accounts.config_file import load
from accounts.budgetwindows import DAY
from tests.e2e import clients
from tests.e2e.conftest import pool_config
from tests.servers import Server, database_url, gateway_processes, seen

pytestmark = pytest.mark.django_db(transaction=True)

# $1000 per million tokens: each scripted answer (~7 tokens) costs about $0.007.
PRICES = {"mock-*": {"input": 1000, "output": 1000}}
CHAT_MODEL = "up-openai_chat/mock-text"
MESSAGES_MODEL = "up-anthropic/mock-text"
RESPONSES_MODEL = "up-responses/mock-text"


def budget_key(mock: Server, **budgets: str) -> str:
    plain = f"gw-usd-{uuid.uuid4().hex}"
    config = pool_config(mock, prices=PRICES)
    config["client_keys"].append({"name": plain[-12:], "key": plain, **budgets})
    load(config)
    return plain


def frees_at(spent_at: float) -> dt.datetime:
    """When spending at ``spent_at`` leaves the rolling 24 hours: the end of its half-hour slice, a day on."""

    return dt.datetime.fromtimestamp(DAY.out_at(DAY.slice_of(spent_at)), dt.timezone.utc)


def chat_until_refused(url: str, key: str, most: int = 10) -> tuple[int, openai.RateLimitError]:
    client = clients.openai_client(url, key)
    for served in range(most):
        try:
            client.chat.completions.create(model=CHAT_MODEL, messages=[{"role": "user", "content": "hi"}])
        except openai.RateLimitError as refused:
            return served, refused
    pytest.fail(f"{most} requests served on a budget a few of them spend")


def test_a_key_is_served_until_its_daily_usd_budget_is_spent_then_gets_429(
        pool: Any, gateway: Server, mock_upstream: Server) -> None:
    """A spent budget frees at a known time, not in seconds: OpenAI's insufficient_quota, Anthropic's
    billing_error, and x-should-retry: false for the SDKs (gateway.limits.standing)."""

    key = budget_key(mock_upstream, usd_budget_day="0.01")
    seen(gateway)
    started = time.time()
    served, refused = chat_until_refused(gateway.url, key)
    assert served == 2  # $0.007 spent after one: a second is served and crosses $0.01
    assert refused.status_code == 429
    assert refused.response.headers["x-should-retry"] == "false"
    assert isinstance(refused.body, dict) and refused.body["type"] == "insufficient_quota"
    assert refused.body["code"] == "insufficient_quota"
    message = refused.body["message"]
    assert message.startswith("This key's 24-hour USD budget of $0.01 is used up ($0.014 in the last 24 hours)")
    assert message.endswith("; ask your gateway's administrators if you need it raised")
    # Both answers were spent in the slice the test started in (unless it started on a slice's edge).
    frees = frees_at(started) if frees_at(started) == frees_at(time.time()) else None
    if frees is not None:
        assert f"it frees {frees:%b %-d at %H:%M} UTC" in message
        assert abs(int(refused.response.headers["retry-after"]) - (frees.timestamp() - time.time())) < 5

    # The Messages API sees Anthropic's billing_error, with the usage headers Claude Code reads.
    with pytest.raises(anthropic.RateLimitError) as messages_refused:
        clients.anthropic_client(gateway.url, key).messages.create(
            model=MESSAGES_MODEL, max_tokens=20, messages=[{"role": "user", "content": "hi"}])
    body = messages_refused.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "billing_error"
    assert body["error"]["message"].startswith("This key's 24-hour USD budget of $0.01 is used up")
    headers = messages_refused.value.response.headers
    assert int(headers["retry-after"]) > 60
    assert headers["anthropic-ratelimit-unified-status"] == "rejected"
    # And the Responses API, in its own envelope.
    with pytest.raises(openai.RateLimitError) as responses_refused:
        clients.openai_client(gateway.url, key).responses.create(model=RESPONSES_MODEL, input="hi")
    assert isinstance(responses_refused.value.body, dict)
    assert responses_refused.value.body["message"].startswith("This key's 24-hour USD budget of $0.01 is used up")


def test_a_streamed_answer_is_charged_to_the_budget_when_its_stream_ends(pool: Any, gateway: Server,
                                                                        mock_upstream: Server) -> None:
    key = budget_key(mock_upstream, usd_budget_day="0.001")
    seen(gateway)
    client = clients.openai_client(gateway.url, key)
    chunks = list(client.chat.completions.create(model=CHAT_MODEL, messages=[{"role": "user", "content": "hi"}],
                                                 stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 1  # priced above $0.001
    time.sleep(0.2)  # the stream's settle runs after its last byte
    with pytest.raises(openai.RateLimitError, match="24-hour USD budget of \\$0.001 is used up"):
        client.chat.completions.create(model=CHAT_MODEL, messages=[{"role": "user", "content": "hi"}])


def test_other_keys_and_unlimited_windows_are_not_held_back(pool: Any, gateway: Server,
                                                            mock_upstream: Server) -> None:
    spent = budget_key(mock_upstream, usd_budget_5h="0.001")
    roomy = budget_key(mock_upstream, usd_budget_month="100")
    seen(gateway)
    served, refused = chat_until_refused(gateway.url, spent)
    assert served == 1 and "5-hour USD budget of $0.001 is used up" in str(refused.body)
    client = clients.openai_client(gateway.url, roomy)
    for _ in range(4):
        client.chat.completions.create(model=CHAT_MODEL, messages=[{"role": "user", "content": "hi"}])


@pytest.fixture
def two_gateways_on_redis(pool: Any) -> Iterator[tuple[Server, Server]]:
    redis_url = os.environ.get("REDIS_URL", "")
    if not redis_url.startswith("redis://") or connection.vendor != "postgresql":
        pytest.skip("REDIS_URL and a PostgreSQL DATABASE_URL are needed for gateways sharing a budget")
    with gateway_processes(database_url(connection.settings_dict), 2, {"REDIS_URL": redis_url}) as (first, second):
        yield first, second


def test_two_gateway_processes_share_a_usd_budget_through_redis(
        two_gateways_on_redis: tuple[Server, Server], mock_upstream: Server) -> None:
    first, second = two_gateways_on_redis
    key = budget_key(mock_upstream, usd_budget_day="0.02")  # three answers' worth, about
    seen(first, second)
    statuses = []
    for gw in (first, second) * 4:
        try:
            clients.openai_client(gw.url, key).chat.completions.create(
                model=CHAT_MODEL, messages=[{"role": "user", "content": "hi"}])
            statuses.append(200)
        except openai.RateLimitError:
            statuses.append(429)
        time.sleep(0.05)  # the settle after each answer runs on the serving process's loop
    # Counted per process each gateway would serve three; shared, the deployment serves three in all.
    assert statuses[:3] == [200, 200, 200] and set(statuses[3:]) == {429}, statuses
