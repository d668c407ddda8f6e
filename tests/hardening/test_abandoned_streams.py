"""Streams a client abandons are billed: the upstream generated what it sent, whoever stopped reading.

The attack: streams cut by the client after 120 of their 150 deltas, wave after wave on a $0.01 budget.
The upstream's usage (a Chat stream's last chunk) never reached the gateway: it logged 0 tokens, charged
$0.00, and every wave was admitted. Now the gateway reads on after the client leaves, for the usage the
stream ends with (``GATEWAY_ABANDONED_STREAM_SECONDS``); what never comes (the upstream cut, or slower
than that) is estimated from what was sent and read, and the row says so (``usage_estimated``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from decimal import Decimal
from typing import Any

import httpx
import pytest

from accounts.config_file import load
from accounts.models import ApiKey, RequestLog
from tests.e2e.conftest import pool_config
from tests.servers import Server, own_gateway

pytestmark = pytest.mark.django_db(transaction=True)

PRICES = {"mock-*": {"input": 20, "output": 20}}  # $20 per million tokens
BUDGET = Decimal("0.01")
SLOW = "up-openai_chat/mock-slow-150x20"  # 150 deltas, 20 ms apart


def budget_key(mock: Server, budget: Decimal | None = BUDGET) -> tuple[str, int]:
    plain = f"gw-cut-{uuid.uuid4().hex}"
    config = pool_config(mock, prices=PRICES)
    config["client_keys"].append({"name": plain[-12:], "key": plain,
                                  **({"usd_budget_day": str(budget)} if budget is not None else {})})
    load(config)
    return plain, ApiKey.objects.get(name=plain[-12:]).pk


async def cut_stream(url: str, key: str, model: str, after: int) -> int:
    """A Chat stream read until ``after`` content deltas, then dropped; its status."""

    body = {"model": model, "max_tokens": 1, "stream": True, "messages": [{"role": "user", "content": "go"}]}
    async with httpx.AsyncClient(base_url=url, timeout=30, headers={"Authorization": f"Bearer {key}"}) as client:
        async with client.stream("POST", "/v1/chat/completions", json=body) as answer:
            if answer.status_code != 200:
                return answer.status_code
            seen = 0
            async for line in answer.aiter_lines():
                if line.startswith("data:") and '"content":"' in line:
                    seen += 1
                    if seen >= after:
                        break  # leaving the block drops the connection
    return 200


def rows(key_id: int, count: int, timeout: float = 15.0) -> list[RequestLog]:
    deadline = time.monotonic() + timeout
    while True:
        found = list(RequestLog.objects.filter(client_key_id=key_id, status=200))
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_waves_of_abandoned_streams_are_charged_and_stop_at_the_budget(pool: Any, gateway: Server,
                                                                      mock_upstream: Server) -> None:
    # What one whole stream costs, read to its end by a key without a budget.
    free, free_id = budget_key(mock_upstream, None)
    assert asyncio.run(cut_stream(gateway.url, free, SLOW, 10**6)) == 200
    whole = rows(free_id, 1)[0]
    assert not whole.usage_estimated and whole.output_tokens == 150 and whole.cost
    per_stream = whole.cost

    key, key_id = budget_key(mock_upstream)
    statuses: list[int] = []
    for _ in range(4):  # waves of 3 at once, each stream left after 120 of its 150 deltas
        statuses += asyncio.run(_wave(gateway.url, key, 3))
        time.sleep(1.0)  # the drain finishes, the row is charged
    served = statuses.count(200)
    logged = rows(key_id, served)
    charged = sum((r.cost or Decimal(0) for r in logged), Decimal(0))
    generated = served * per_stream  # the scripted upstream finished each served stream
    print(f"\n{served} of {len(statuses)} abandoned streams served: generated ${generated:.4f} "
          f"({generated / BUDGET:.1f}× the budget), charged ${charged:.4f}")
    assert set(statuses) <= {200, 429} and 429 in statuses
    assert len(logged) == served and all(r.error_class == "client_disconnected" for r in logged)
    assert all(r.output_tokens == 150 and not r.usage_estimated for r in logged)  # the drain brought the usage
    assert charged == generated
    assert generated / BUDGET <= Decimal("2")  # a wave in flight may cross the budget, no wave after it


async def _wave(url: str, key: str, count: int) -> list[int]:
    return list(await asyncio.gather(*(cut_stream(url, key, SLOW, 120) for _ in range(count))))


def test_a_stream_the_upstream_cuts_is_charged_an_estimate_and_marked_so(pool: Any, gateway: Server,
                                                                         mock_upstream: Server) -> None:
    key, key_id = budget_key(mock_upstream, None)
    # Three deltas, then the scripted upstream drops the connection: no usage ever comes.
    assert asyncio.run(cut_stream(gateway.url, key, "up-openai_chat/mock-disconnect", 10**6)) == 200
    row = rows(key_id, 1)[0]
    assert row.usage_estimated and row.output_tokens >= 3 and row.input_tokens > 0 and row.cost


def test_a_stream_slower_than_the_drain_is_charged_what_was_read(pool: Any, mock_upstream: Server,
                                                                 django_db_blocker: Any) -> None:
    with own_gateway(django_db_blocker, {"GATEWAY_ABANDONED_STREAM_SECONDS": "0.5"}) as impatient:
        key, key_id = budget_key(mock_upstream, None)
        started = time.monotonic()
        assert asyncio.run(cut_stream(impatient.url, key, "up-openai_chat/mock-slow-150x50", 20)) == 200
        row = rows(key_id, 1)[0]
        assert time.monotonic() - started < 5  # not the 7.5 s the whole answer takes
    assert row.usage_estimated and row.error_class == "client_disconnected"
    assert 20 <= row.output_tokens < 150  # what was read: the deltas sent, and those of the half second after
    assert row.cost
