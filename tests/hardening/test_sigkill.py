"""A gateway killed under load (SIGKILL: no drain, no flush) loses no finished request's log row.

Each record is on disk (the log spool) the moment its request finishes; the next gateway process
started on the same database writes what the killed one had not, each row once.
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from typing import Any

import httpx
import pytest
from django.db import connection

from accounts.config_file import load
from accounts.models import RequestLog
from tests.e2e.conftest import pool_config
from tests.servers import Server, database_url, start_gateway

pytestmark = pytest.mark.django_db(transaction=True)

CONCURRENCY = 8
SECONDS = 2.5


async def load_until_killed(gateway: Server, key: str) -> tuple[int, int]:
    """Requests until the gateway is killed mid-load; (sent, answered completely)."""

    sent = answered = 0
    started = time.monotonic()

    async def client(n: int) -> None:
        nonlocal sent, answered
        async with httpx.AsyncClient(base_url=gateway.url, timeout=10,
                                     headers={"authorization": f"Bearer {key}"}) as http:
            i = 0
            while True:
                i += 1
                stream = (n + i) % 2 == 0
                body = {"model": "up-openai_chat/mock-text", "stream": stream,
                        "messages": [{"role": "user", "content": f"hello {n} {i}"}]}
                sent += 1
                try:
                    async with http.stream("POST", "/v1/chat/completions", json=body) as response:
                        text = (await response.aread()).decode()
                except httpx.HTTPError:
                    return  # killed
                if response.status_code == 200 and ("[DONE]" in text if stream else '"choices"' in text):
                    answered += 1

    async def killer() -> None:
        await asyncio.sleep(SECONDS - (time.monotonic() - started))
        gateway.proc.send_signal(signal.SIGKILL)

    await asyncio.gather(*(client(n) for n in range(CONCURRENCY)), killer())
    return sent, answered


def test_rows_of_requests_answered_before_a_sigkill_are_written_by_the_next_process(
        django_db_blocker: Any, mock_upstream: Server) -> None:
    key = f"gw-killed-{uuid.uuid4().hex}"
    config = pool_config(mock_upstream)
    config["client_keys"] = [{"name": key[-12:], "key": key}]
    load(config)
    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    first = start_gateway(url, {"LOG_LEVEL": "ERROR"})
    sent, answered = asyncio.run(load_until_killed(first, key))
    first.proc.wait(10)
    rows = RequestLog.objects.filter(client_key_name=key[-12:])
    written_before = rows.count()
    assert answered > 50 and written_before < answered  # the kill really cut off unwritten rows

    second = start_gateway(url, {"LOG_LEVEL": "ERROR"})
    try:
        deadline = time.monotonic() + 15
        while rows.count() < answered and time.monotonic() < deadline:
            time.sleep(0.2)
        assert answered <= rows.count() <= sent  # every answered request has its row
        assert rows.values("request_id").distinct().count() == rows.count()  # each once
    finally:
        second.stop()
