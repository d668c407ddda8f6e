"""With PostgreSQL and Redis, a dashboard connected to gateway B sees a request served by gateway A."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from accounts.config_file import load
from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, database_url, gateway_processes

REDIS_URL = os.environ.get("REDIS_URL", "")

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not REDIS_URL, reason="needs REDIS_URL (the shared channel layer); CI sets it"),
    pytest.mark.skipif(not os.environ.get("DATABASE_URL", "").startswith("postgres"),
                       reason="needs DATABASE_URL on PostgreSQL (two gateway processes share it); CI sets it"),
]


@pytest.fixture
def two_gateways(mock_upstream: Server) -> Iterator[tuple[Server, Server]]:
    url = database_url(connection.settings_dict)
    with gateway_processes(url, 2, {"REDIS_URL": REDIS_URL}) as (a, b):
        yield a, b


async def watch(b: Server, session: str, model: str, started: asyncio.Event) -> dict[str, Any]:
    """Messages from B's dashboard websocket until one carries a row for ``model``."""

    cookies = {"sessionid": session}
    async with aiohttp.ClientSession(cookies=cookies) as http, \
            http.ws_connect(b.url.replace("http", "ws") + "/ws/dashboard/", headers={"Origin": b.url}) as ws:
        assert (await ws.receive_json(timeout=10))["kind"] == "hello"
        started.set()
        while True:
            msg = await ws.receive_json(timeout=15)
            if msg["kind"] == "requests.logged" and any(model in r["html"] for r in msg["rows"]):
                return msg


def test_a_request_served_by_one_process_appears_on_a_dashboard_connected_to_another(
        two_gateways: tuple[Server, Server], mock_upstream: Server) -> None:
    a, b = two_gateways
    load(pool_config(mock_upstream))
    user = User.objects.create_user("ops", is_staff=True)
    client = Client()
    client.force_login(user)
    model = f"up-openai_chat/mock-text-{uuid.uuid4().hex[:8]}"

    async def scenario() -> dict[str, Any]:
        started = asyncio.Event()
        watcher = asyncio.create_task(watch(b, client.cookies["sessionid"].value, model, started))
        await asyncio.wait_for(started.wait(), 10)
        sdk = clients.openai_client(a.url, CLIENT_KEY)
        out = await asyncio.to_thread(clients.chat_call, sdk, model, [{"role": "user", "content": "hi"}], False)
        assert out.text
        return await asyncio.wait_for(watcher, 20)

    msg = asyncio.run(scenario())
    row = next(r for r in msg["rows"] if model in r["html"])
    assert row["id"].startswith("req_") and "200" in row["html"]
    assert msg["accounts"] and msg["accounts"][0]["fields"]["requests"] == "1"
