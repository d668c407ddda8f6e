"""/metrics stays bounded whatever model names a client makes up: 2,000 distinct names, routed by a glob
alias or in the ``provider/model`` form, leave the number of series a scrape returns unchanged.

(Each name once opened its own label set: ~47 series a name, and a scrape 20 times its size.)
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from accounts.config_file import load
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, own_gateway

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "metrics-bounded-token-31c9"
NAMES = 2_000


@pytest.fixture(scope="module")
def metered(django_db_setup: Any, django_db_blocker: Any, mock_upstream: Server) -> Iterator[Server]:
    with own_gateway(django_db_blocker, {"GATEWAY_METRICS_TOKEN": TOKEN}) as server:
        yield server


def series(gateway: Server) -> tuple[int, int]:
    """The samples a scrape returns, and its size in bytes."""

    text = httpx.get(gateway.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30).text
    return sum(1 for line in text.splitlines() if line and not line.startswith("#")), len(text)


async def ask(url: str, models: list[str], at_once: int = 16) -> list[int]:
    gate = asyncio.Semaphore(at_once)
    async with httpx.AsyncClient(base_url=url, timeout=30,
                                 headers={"Authorization": f"Bearer {CLIENT_KEY}"}) as client:
        async def one(model: str) -> int:
            async with gate:
                answer = await client.post("/v1/chat/completions", json={
                    "model": model, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
                return answer.status_code

        return await asyncio.gather(*(one(m) for m in models))


def test_two_thousand_made_up_model_names_leave_the_series_count_unchanged(metered: Server,
                                                                           mock_upstream: Server) -> None:
    config = pool_config(mock_upstream)
    config["aliases"] = [{"name": "gpt-*", "provider": "up-openai_chat", "model": "mock-text"}]
    load(config)
    run = uuid.uuid4().hex[:8]
    # One of each form first: the label sets they fall in exist from then on.
    assert asyncio.run(ask(metered.url, [f"gpt-{run}-warm", f"up-openai_chat/{run}-warm"])) == [200, 200]
    before, before_bytes = series(metered)
    names = [f"gpt-{run}-{i}" if i % 2 else f"up-openai_chat/{run}-{i}" for i in range(NAMES)]
    statuses = asyncio.run(ask(metered.url, names))
    assert statuses == [200] * NAMES
    after, after_bytes = series(metered)
    print(f"\nseries {before} → {after} after {NAMES} names; scrape {before_bytes} → {after_bytes} bytes")
    assert after == before
    assert after_bytes <= before_bytes + 1_000  # the counts grow a digit or two, not the label sets
