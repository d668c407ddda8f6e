"""The providers' prompt cache through a real gateway: breakpoints placed on translated requests, and what
cached input costs and shows (the request log, the spend buckets, the dashboard, /metrics).

The scripted upstream caches per account key as the providers do (``mockupstream.promptcache``); every
pool here has one account per provider, so a conversation stays on its account whatever the selection.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import anthropic
import httpx
import openai
import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts.config_file import load
from accounts.models import ApiKey, RequestLog
from dashboard import spendstats, stats
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.e2e.test_metrics import samples
from tests.servers import Server, own_gateway, received

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "metrics-cache-token-51c9"
SYSTEM = "You are a careful assistant who answers in full sentences and checks every fact. " * 80  # 1,640 tokens
CLAUDE = {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75, "cache_write_1h": 6}
PRICES = {"claude-*": CLAUDE, "gpt-*": {"input": 2, "output": 8}}  # gpt: cache rates by default
PER = Decimal(1_000_000)


@pytest.fixture(scope="module")
def cached_gateway(django_db_setup: Any, django_db_blocker: Any, mock_upstream: Server) -> Iterator[Server]:
    with own_gateway(django_db_blocker, {"GATEWAY_METRICS_TOKEN": TOKEN}) as server:
        yield server


@pytest.fixture
def gateway(cached_gateway: Server, mock_upstream: Server) -> Server:
    load(pool_config(mock_upstream, prices=PRICES))
    httpx.post(mock_upstream.url + "/_mock/reset").raise_for_status()  # every account's cache empty
    return cached_gateway


def unique(model: str) -> str:
    return f"{model}-{uuid.uuid4().hex[:8]}"


def logged(model: str, count: int, timeout: float = 15.0) -> list[RequestLog]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = list(RequestLog.objects.filter(model_requested=model).order_by("created_at"))
        if len(rows) >= count:
            return rows
        time.sleep(0.1)
    raise AssertionError(f"{count} request-log rows for {model} did not arrive")


def chat_turns(gateway: Server, model: str) -> list[Any]:
    """Two turns of a Chat conversation; the usage of each."""

    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=CLIENT_KEY, max_retries=0)
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Where is Paris?"}]
    first = client.chat.completions.create(model=model, messages=messages)
    messages += [{"role": "assistant", "content": first.choices[0].message.content},
                 {"role": "user", "content": "And Rome?"}]
    second = client.chat.completions.create(model=model, messages=messages)
    return [first.usage, second.usage]


def test_a_chat_conversation_translated_to_anthropic_reads_its_prefix_from_cache_on_the_next_turn(
        gateway: Server, mock_upstream: Server) -> None:
    first, second = chat_turns(gateway, unique("up-anthropic/claude-sonnet-4-6"))
    assert first.prompt_tokens_details.cached_tokens == 0
    # The whole of the first turn's prompt is read back: the breakpoint on its last message was written.
    assert second.prompt_tokens_details.cached_tokens == first.prompt_tokens
    sent = [r["body"] for r in received(mock_upstream) if r["path"] == "/v1/messages"][-1]
    assert sent["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert sent["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


def test_without_breakpoints_a_translated_conversation_is_never_read_from_cache(
        cached_gateway: Server, mock_upstream: Server) -> None:
    load(pool_config(mock_upstream, prices=PRICES, cache_breakpoints=False))
    httpx.post(mock_upstream.url + "/_mock/reset").raise_for_status()
    first, second = chat_turns(cached_gateway, unique("up-anthropic/claude-sonnet-4-6"))
    assert first.prompt_tokens_details.cached_tokens == second.prompt_tokens_details.cached_tokens == 0
    sent = [r["body"] for r in received(mock_upstream) if r["path"] == "/v1/messages"][-1]
    assert "cache_control" not in str(sent)
    load(pool_config(mock_upstream, prices=PRICES))  # the switch back on for the tests that follow


def claude_turns(gateway: Server, model: str) -> list[Any]:
    """Claude Code's way: its own breakpoints, the system prompt kept an hour, the conversation five minutes."""

    client = anthropic.Anthropic(base_url=gateway.url, api_key=CLIENT_KEY, max_retries=0)
    system = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    task = "Here is the task in every detail you need. " * 40
    messages: list[Any] = [{"role": "user", "content": [
        {"type": "text", "text": task, "cache_control": {"type": "ephemeral"}}]}]
    usages = []
    for follow_up in ("Go on.", "And then?"):
        answer = client.messages.create(model=model, max_tokens=64, system=system, messages=messages)
        usages.append(answer.usage)
        messages = [*messages, {"role": "assistant", "content": answer.content[0].text},
                    {"role": "user", "content": [{"type": "text", "text": follow_up,
                                                  "cache_control": {"type": "ephemeral"}}]}]
    return usages


def claude_cost(u: Any) -> Decimal:
    """What a Messages usage costs at CLAUDE's rates, each kind of input token at its own."""

    hour = u.cache_creation.ephemeral_1h_input_tokens
    five = u.cache_creation.ephemeral_5m_input_tokens
    return (u.input_tokens * Decimal(CLAUDE["input"]) + u.cache_read_input_tokens * Decimal(str(CLAUDE["cache_read"]))
            + five * Decimal(str(CLAUDE["cache_write"])) + hour * Decimal(CLAUDE["cache_write_1h"])
            + u.output_tokens * Decimal(CLAUDE["output"])) / PER


def test_spend_counts_cache_reads_and_writes_at_their_own_rates(gateway: Server) -> None:
    model = unique("up-anthropic/claude-sonnet-4-6")
    usages = claude_turns(gateway, model)
    first, second = usages
    assert first.cache_creation.ephemeral_1h_input_tokens > 0 and first.cache_creation.ephemeral_5m_input_tokens > 0
    assert second.cache_read_input_tokens > 0  # the system prompt and the first turn
    rows = logged(model, 2)
    for row, u in zip(rows, usages):
        assert row.input_tokens == (u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens)
        assert (row.cached_tokens, row.cache_write_tokens, row.cache_write_1h_tokens) == (
            u.cache_read_input_tokens, u.cache_creation_input_tokens, u.cache_creation.ephemeral_1h_input_tokens)
        assert row.cost == claude_cost(u)
    # The spend buckets of the key and model add up to the same figures.
    key = ApiKey.objects.get(name="e2e")
    spent = spendstats.by(stats.WINDOWS["1h"], "model", key.pk)[model]
    assert spent.cost == sum((claude_cost(u) for u in usages), Decimal(0))
    assert spent.cached_tokens == sum(u.cache_read_input_tokens for u in usages)
    assert spent.cache_write_tokens == sum(u.cache_creation_input_tokens for u in usages)


def test_openai_cached_input_costs_a_tenth_of_the_input_rate_when_the_table_names_no_cache_rate(
        gateway: Server) -> None:
    model = unique("up-responses/gpt-5-mini")
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=CLIENT_KEY, max_retries=0)
    usages = [client.responses.create(model=model, instructions=SYSTEM, input=question).usage
              for question in ("Where is Paris?", "And Rome?")]
    assert usages[0].input_tokens_details.cached_tokens == 0 and usages[1].input_tokens_details.cached_tokens > 0
    for row, u in zip(logged(model, 2), usages):
        cached = u.input_tokens_details.cached_tokens
        assert row.cached_tokens == cached and row.cache_write_tokens == 0
        assert row.cost == ((u.input_tokens - cached) * 2 + cached * Decimal("0.2") + u.output_tokens * 8) / PER


def test_the_dashboard_and_metrics_show_cached_and_uncached_input_and_the_hit_rate(
        gateway: Server, django_user_model: Any) -> None:
    before = samples(httpx.get(gateway.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text)
    model = unique("up-anthropic/claude-sonnet-4-6")
    usages = claude_turns(gateway, model)
    rows = logged(model, 2)
    cached, total = sum(r.cached_tokens for r in rows), sum(r.input_tokens for r in rows)
    assert cached == sum(u.cache_read_input_tokens for u in usages) and 0 < cached < total

    # /metrics: input split into cached and uncached, and the writes.
    after = samples(httpx.get(gateway.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text)
    # A provider/model name no list names is counted under its provider's pattern (bounded labels).
    labels = {"client_protocol": "anthropic", "provider": "up-anthropic", "model": "up-anthropic/*",
              "client_key": "e2e"}

    def grew(kind: str) -> float:
        key = ("gateway_tokens_total", frozenset({**labels, "kind": kind}.items()))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert grew("input") == total and grew("cached") == cached and grew("uncached_input") == total - cached
    assert grew("cache_write") == sum(r.cache_write_tokens for r in rows)
    assert grew("cache_write_1h") == sum(r.cache_write_1h_tokens for r in rows) > 0

    # The dashboard: the key's page and the model's row give the hit rate of these requests.
    staff = Client()
    staff.force_login(User.objects.create_user(f"ops-{uuid.uuid4().hex[:6]}", is_staff=True))
    key = ApiKey.objects.get(name="e2e")
    page = staff.get(f"/dashboard/keys/{key.pk}/?window=1h").content.decode()
    spent = spendstats.by(stats.WINDOWS["1h"], "model", key.pk)
    shown = f"{sum(s.cached_tokens for s in spent.values()) / sum(s.input_tokens for s in spent.values()) * 100:.1f} %"
    assert f'<td data-field="cache_hit_rate">{shown}</td>' in page
    model_rate = f"{cached / total * 100:.1f} %"
    row = page[page.index(f'<td class="name">{model}</td>'):]
    assert row[:row.index("</tr>")].count(f'data-field="cache_hit_rate">{model_rate}<') == 1
    account_page = staff.get(f"/dashboard/accounts/{rows[0].account_id}/?window=1h").content.decode()
    assert 'data-field="cache_hit_rate"' in account_page
