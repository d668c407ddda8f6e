"""Budgets count what goes upstream: a ``previous_response_id`` follow-up of a few bytes stands for the whole
conversation the gateway writes out for the upstream, and compaction's summary request carries it too.

The attack: one 40 KB stored turn, then 30 concurrent follow-ups (each asking for 16 output tokens, so
each reserved next to nothing) on a $0.50 budget. Each follow-up reserved its own few bytes and all 30
were admitted: $3.1 spent (6.2×). Counting the conversation, the budget admits what it can pay for and
the request that crosses it: spent ÷ budget stays within one request's reservation of 1.
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
from accounts.models import RequestLog
from tests.e2e.conftest import pool_config
from tests.servers import Server

pytestmark = pytest.mark.django_db(transaction=True)

# $10 per million tokens: the scripted upstream counts a quarter of the text's characters as input
# tokens, so 40 KB of conversation costs $0.10 a request.
PRICES = {"mock-*": {"input": 10, "output": 10}}
MODEL = "up-openai_chat/mock-text"  # a Chat upstream: the conversation is written out for it
BUDGET = Decimal("0.50")
FOLLOW_UPS = 30


def budget_key(mock: Server) -> tuple[str, int]:
    plain = f"gw-hostile-{uuid.uuid4().hex}"
    config = pool_config(mock, prices=PRICES)
    config["client_keys"].append({"name": plain[-12:], "key": plain, "usd_budget_day": str(BUDGET)})
    load(config)
    from accounts.models import ApiKey

    return plain, ApiKey.objects.get(name=plain[-12:]).pk


def spent(key_id: int, requests: int, timeout: float = 10.0) -> Decimal:
    """What the request log charged the key, once it holds ``requests`` answered rows."""

    deadline = time.monotonic() + timeout
    while True:
        rows = list(RequestLog.objects.filter(client_key_id=key_id, status=200))
        if len(rows) >= requests or time.monotonic() > deadline:
            return sum((r.cost or Decimal(0) for r in rows), Decimal(0))
        time.sleep(0.1)


async def follow_ups(url: str, key: str, path: str, body: dict[str, Any], count: int) -> list[int]:
    async with httpx.AsyncClient(base_url=url, timeout=60, headers={"Authorization": f"Bearer {key}"}) as client:
        answers = await asyncio.gather(*(client.post(path, json=body) for _ in range(count)))
    return [a.status_code for a in answers]


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/responses/compact"])
def test_concurrent_follow_ups_of_a_long_stored_turn_stay_within_the_budget(
        pool: Any, gateway: Server, mock_upstream: Server, path: str) -> None:
    key, key_id = budget_key(mock_upstream)
    long_turn = " ".join(["lorem"] * (40 * 1024 // 6))  # 40 KB of text
    first = httpx.post(gateway.url + "/v1/responses", timeout=30, headers={"Authorization": f"Bearer {key}"},
                       json={"model": MODEL, "input": long_turn, "max_output_tokens": 16})
    assert first.status_code == 200, first.text
    follow = {"model": MODEL, "previous_response_id": first.json()["id"], "max_output_tokens": 16,
              "input": [{"type": "message", "role": "user", "content": "and then?"}]}
    statuses = asyncio.run(follow_ups(gateway.url, key, path, follow, FOLLOW_UPS))
    served = statuses.count(200)
    assert set(statuses) <= {200, 429}
    total = spent(key_id, served + 1)
    ratio = total / BUDGET
    print(f"\n{path}: {served} of {FOLLOW_UPS} follow-ups served, ${total:.2f} spent on ${BUDGET}: {ratio:.2f}×")
    assert served < FOLLOW_UPS  # refused once the budget is taken
    # The first turn, then what the budget held room for, then the one request that crossed it (a summary
    # may answer past the output it reserved: 1.24× measured for compaction, 1.03× for plain follow-ups).
    assert ratio <= Decimal("1.5")


def test_a_follow_up_whose_written_out_conversation_passes_the_body_limit_is_refused_413(
        pool: Any, mock_upstream: Server, django_db_blocker: Any) -> None:
    from tests.e2e.conftest import CLIENT_KEY
    from tests.servers import own_gateway

    with own_gateway(django_db_blocker, {"GATEWAY_MAX_BODY_BYTES": str(64 * 1024)}) as small:
        headers = {"Authorization": f"Bearer {CLIENT_KEY}"}
        turn = {"model": MODEL, "input": "x" * (40 * 1024)}
        first = httpx.post(small.url + "/v1/responses", json=turn, headers=headers, timeout=30)
        assert first.status_code == 200, first.text
        httpx.post(mock_upstream.url + "/_mock/reset")
        second = httpx.post(small.url + "/v1/responses", headers=headers, timeout=30,
                            json={**turn, "previous_response_id": first.json()["id"]})
        assert second.status_code == 413
        message = second.json()["error"]["message"]
        assert message.startswith("The request body exceeds the limit of 65536 bytes with the conversation")
        assert httpx.get(mock_upstream.url + "/_mock/stats").json()["requests"] == 0  # nothing went upstream
