"""PostgreSQL restarts under load: the gateway's connections are all cut; it recovers by itself.

Every connection the gateway holds (its pool's picks on the event loop, the worker threads'
Django connections behind config, key and token reads, the request-log writer's) is terminated
by the database in the middle of a steady load. Each hop checks its connections
(``accounts.db``), the pool replaces a broken pick connection, the log writer keeps a failed
batch and writes it again: every request is answered, and every request keeps its log row.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.db import connection

from accounts.config_file import load
from accounts.models import RequestLog
from tests.e2e.conftest import pool_config
from tests.servers import PRODUCTION_TTLS, Server, own_gateway

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("postgresql" not in settings.DATABASES["default"]["ENGINE"],
                       reason="needs DATABASE_URL=postgres://… (the database restarts under the gateway)"),
]

SECONDS = 6.0
CUT_AT = 2.0
CONCURRENCY = 8


@pytest.fixture
def production_gateway(django_db_blocker: Any, mock_upstream: Server) -> Iterator[Server]:
    """A gateway with the production TTLs: its config and keys are cached and re-read in the background."""

    with own_gateway(django_db_blocker, {"LOG_LEVEL": "WARNING"}, ttls=PRODUCTION_TTLS) as server:
        yield server


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def terminate_all_but(test_pid: int) -> int:
    """End every connection to the database but the test's own (this thread's and the main one)."""

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                           " WHERE datname = current_database() AND pid NOT IN (pg_backend_pid(), %s)",
                           [test_pid])
            return int(cursor.fetchone()[0])
    finally:
        connection.close()


async def load_with_a_cut(url: str, key: str, test_pid: int) -> tuple[Counter[int], int, int]:
    statuses: Counter[int] = Counter()
    after_cut_ok = 0
    started = time.monotonic()
    cut = asyncio.Event()

    async def client(n: int) -> None:
        nonlocal after_cut_ok
        async with httpx.AsyncClient(base_url=url, timeout=30,
                                     headers={"authorization": f"Bearer {key}"}) as http:
            i = 0
            while time.monotonic() - started < SECONDS:
                i += 1
                stream = (n + i) % 2 == 0
                body = {"model": "up-openai_chat/mock-text", "stream": stream,
                        "messages": [{"role": "user", "content": f"hello {n} {i}"}]}
                async with http.stream("POST", "/v1/chat/completions", json=body) as response:
                    text = (await response.aread()).decode()
                ok = response.status_code == 200 and ("[DONE]" in text if stream else '"choices"' in text)
                statuses[response.status_code if ok else -response.status_code] += 1
                if ok and cut.is_set():
                    after_cut_ok += 1

    async def cutter() -> int:
        await asyncio.sleep(CUT_AT)
        killed = await asyncio.to_thread(terminate_all_but, test_pid)
        cut.set()
        return killed

    *_, killed = await asyncio.gather(*(client(n) for n in range(CONCURRENCY)), cutter())
    return statuses, after_cut_ok, killed


def test_every_request_is_answered_and_logged_across_a_database_restart(production_gateway: Server,
                                                                         mock_upstream: Server) -> None:
    key = f"gw-restart-{uuid.uuid4().hex}"
    config = pool_config(mock_upstream)
    config["client_keys"] = [{"name": key[-12:], "key": key}]
    load(config)
    httpx.post(mock_upstream.url + "/_mock/reset")

    statuses, after_cut_ok, killed = asyncio.run(load_with_a_cut(production_gateway.url, key, backend_pid()))
    sent = sum(statuses.values())
    assert killed >= 1  # the gateway's connections really were cut
    assert statuses == Counter({200: sent}), statuses  # nobody saw the restart
    assert after_cut_ok >= 20  # and the load went on after it
    rows = RequestLog.objects.filter(client_key_name=key[-12:])
    deadline = time.monotonic() + 15
    while rows.count() < sent and time.monotonic() < deadline:
        time.sleep(0.2)
    assert rows.count() == sent  # no row lost
    assert set(rows.values_list("status", flat=True)) == {200}
