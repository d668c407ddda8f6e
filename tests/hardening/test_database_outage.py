"""PostgreSQL goes away for 15 seconds under load, then comes back.

The database ends the gateway's connections and refuses new ones. While it is away the gateway
serves what needs nothing new from it (a known key, routed through the cached configuration, an
account from the cached pool), answers what does need it (a key it has never seen) with 503 in the
caller's envelope, never 500, and says it is not ready. Once the database is back it recovers by
itself: ready again within seconds, a key deactivated during the outage refused within the
configuration TTL, and every answered request has its log row.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.db import connection

from accounts.config_file import load
from accounts.models import ApiKey, RequestLog
from tests.e2e.conftest import pool_config
from tests.hardening.envelope import CHAT, check_error_envelope
from tests.servers import Server, database_url, start_gateway

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("postgresql" not in settings.DATABASES["default"]["ENGINE"],
                       reason="needs DATABASE_URL=postgres://… (the database goes away under the gateway)"),
]

OUTAGE = 15.0
CONCURRENCY = 4
CONFIG_TTL = 2.0


def allow_connections(allowed: bool) -> None:
    """From the server's maintenance database; the outage spares the test's own connection."""

    import psycopg

    params = connection.get_connection_params()
    for django_only in ("cursor_factory", "context"):
        params.pop(django_only, None)
    name = params.pop("dbname")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        spared = cursor.fetchone()[0]
    with psycopg.connect(**params, dbname="postgres", autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {"true" if allowed else "false"}')
        if not allowed:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> %s",
                          (name, spared))


def chat(key: str) -> dict[str, Any]:
    return {"json": {"model": "up-openai_chat/mock-text", "messages": [{"role": "user", "content": "hi"}]},
            "headers": {"authorization": f"Bearer {key}"}}


async def steady_load(url: str, key: str, seconds: float, statuses: Counter[int]) -> None:
    async def client(n: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=20) as http:
            end = time.monotonic() + seconds
            i = 0
            while time.monotonic() < end:
                i += 1
                body = chat(key)
                body["json"]["stream"] = (n + i) % 2 == 0
                response = await http.post(CHAT, **body)
                statuses[response.status_code] += 1

    await asyncio.gather(*(client(n) for n in range(CONCURRENCY)))


async def during(url: str, key: str) -> dict[str, Any]:
    statuses: Counter[int] = Counter()
    seen: dict[str, Any] = {"load": statuses}
    load_task = asyncio.create_task(steady_load(url, key, OUTAGE - 1, statuses))
    async with httpx.AsyncClient(base_url=url, timeout=20) as http:
        started = time.monotonic()
        while time.monotonic() - started < 5:
            ready = await http.get("/readyz")
            if ready.status_code == 503:
                seen["unready_after"] = time.monotonic() - started
                break
            await asyncio.sleep(0.2)
        seen["unknown_key"] = await http.post(CHAT, **chat(f"gw-never-seen-{uuid.uuid4().hex}"))
    await load_task
    return seen


async def after(url: str, good: str, deactivated: str) -> dict[str, Any]:
    statuses: Counter[int] = Counter()
    seen: dict[str, Any] = {"load": statuses}
    load_task = asyncio.create_task(steady_load(url, good, 6, statuses))
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=url, timeout=20) as http:
        while "ready_after" not in seen and time.monotonic() - started < 15:
            if (await http.get("/readyz")).status_code == 200:
                seen["ready_after"] = time.monotonic() - started
            await asyncio.sleep(0.1)
        while "refused_after" not in seen and time.monotonic() - started < 15:
            if (await http.post(CHAT, **chat(deactivated))).status_code == 401:
                seen["refused_after"] = time.monotonic() - started
            await asyncio.sleep(0.1)
        seen["unknown_key"] = await http.post(CHAT, **chat(f"gw-never-seen-{uuid.uuid4().hex}"))
    await load_task
    return seen


def test_the_gateway_serves_from_memory_during_an_outage_and_recovers_by_itself(
        django_db_blocker: Any, mock_upstream: Server) -> None:
    good, doomed = f"gw-outage-{uuid.uuid4().hex}", f"gw-doomed-{uuid.uuid4().hex}"
    config = pool_config(mock_upstream)
    config["client_keys"] = [{"name": good[-12:], "key": good}, {"name": doomed[-12:], "key": doomed}]
    load(config)
    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    gateway = start_gateway(url, {"GATEWAY_CONFIG_TTL": str(CONFIG_TTL), "GATEWAY_POOL_TTL": "1",
                                  "LOG_LEVEL": "ERROR"})
    try:
        for key in (good, doomed, good, doomed):  # warm: configuration, keys and pool read once
            assert httpx.post(gateway.url + CHAT, timeout=20, **chat(key)).status_code == 200
        time.sleep(1.5)  # the stand-by copy of the pool is read in the background after a pick

        allow_connections(False)
        try:
            ApiKey.objects.filter(name=doomed[-12:]).update(active=False)  # during the outage
            out = asyncio.run(during(gateway.url, good))
        finally:
            allow_connections(True)
        back = asyncio.run(after(gateway.url, good, doomed))
    finally:
        gateway.stop()

    served = out["load"][200]
    print(f"\noutage {OUTAGE:.0f} s: {dict(out['load'])}, not ready after {out.get('unready_after')} s; "
          f"after: {dict(back['load'])}, ready after {back.get('ready_after')} s, "
          f"deactivated key refused after {back.get('refused_after')} s")
    assert out["load"] == Counter({200: served}) and served > 100  # served from memory, none refused
    assert out.get("unready_after") is not None and out["unready_after"] < 5
    unknown = out["unknown_key"]  # what needs the database: 503 in the caller's envelope, never 500
    assert unknown.status_code == 503
    check_error_envelope(CHAT, unknown.status_code, unknown.headers, unknown.content, client_error=False)
    assert back["load"] == Counter({200: back["load"][200]})
    assert back.get("ready_after") is not None and back["ready_after"] < 5
    assert back.get("refused_after") is not None and back["refused_after"] < CONFIG_TTL + 3
    assert back["unknown_key"].status_code == 401
    answered = 4 + served + back["load"][200]
    rows = RequestLog.objects.filter(client_key_name__in=[good[-12:], doomed[-12:]], status=200)
    deadline = time.monotonic() + 15
    while rows.count() < answered and time.monotonic() < deadline:
        time.sleep(0.2)
    assert rows.count() == answered  # no row lost
