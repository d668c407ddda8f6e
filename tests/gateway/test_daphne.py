"""``daphne gateway.asgi:application`` serves the gateway as ``gateway.serve`` does (``gateway.edge.daphne``).

A handful of end-to-end checks on Daphne's own command line, in every ``make test``: a stream through
the official SDK, the dashboard's live websocket, SIGTERM draining (an open stream ends in its
protocol and keeps its log row; with nothing open the stop is immediate and held-back rows are
written) and Twisted's head limits at the gateway's values. CI also runs the whole end-to-end suite
on Daphne (``GATEWAY_TEST_SERVER=daphne``, ``.ci/run``).
"""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import aiohttp
import httpx
import orjson
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from accounts.config_file import load
from accounts.models import RequestLog
from tests.e2e import clients
from tests.e2e.conftest import pool_config
from tests.hardening.raw_http import read_answer, read_until_closed
from tests.hardening.soak_load import terminated
from tests.servers import Server, database_url, start_gateway, start_mock
from tests.translation.openai_chat.sdk_readback import summary_from_stream

pytestmark = pytest.mark.django_db(transaction=True)

HEAD_LIMIT = 8192  # GATEWAY_MAX_HEAD_BYTES of the shared server: well under Twisted's own 16 KiB
HEAD_TIMEOUT = 1.0  # GATEWAY_HEAD_TIMEOUT of the shared server


@pytest.fixture(scope="module")
def upstream() -> Iterator[Server]:
    server = start_mock()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def daphne(django_db_setup: Any, django_db_blocker: Any, upstream: Server) -> Iterator[Server]:
    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    server = start_gateway(url, {"GATEWAY_MAX_HEAD_BYTES": str(HEAD_LIMIT), "GATEWAY_HEAD_TIMEOUT": str(HEAD_TIMEOUT)},
                           server="daphne")
    yield server
    server.stop()


def own_key(mock: Server) -> tuple[str, str]:
    """The default pool and a client key of this test's own: its rows are told apart by the key's name."""

    key = f"gw-daphne-{uuid.uuid4().hex}"
    config = pool_config(mock)
    config["client_keys"] = [{"name": key[-16:], "key": key}]
    load(config)
    return key, key[-16:]


def test_the_openai_sdk_streams_through_daphne_for_longer_than_the_head_timeout(
        daphne: Server, upstream: Server) -> None:
    key, name = own_key(upstream)
    sdk = clients.openai_client(daphne.url, key)
    started = time.monotonic()
    out = clients.chat_call(sdk, "up-openai_chat/mock-slow-30x50", [{"role": "user", "content": "hi"}], True)
    # Twisted's idle timeout is off while a request is served: 1.5 s of stream outlives the 1 s one.
    assert time.monotonic() - started > 1.4
    assert out.text and out.finish == "stop" and out.output_tokens == 30
    wait_for_rows(name, 1)


def test_the_dashboard_websocket_stays_open_and_hears_of_a_request_served_by_daphne(
        daphne: Server, upstream: Server) -> None:
    key, _ = own_key(upstream)
    client = Client()
    client.force_login(User.objects.create_user("ops", is_staff=True))
    model = f"up-openai_chat/mock-text-{uuid.uuid4().hex[:8]}"

    async def scenario() -> dict[str, Any]:
        async with aiohttp.ClientSession(cookies={"sessionid": client.cookies["sessionid"].value}) as http, \
                http.ws_connect(daphne.url.replace("http", "ws") + "/ws/dashboard/",
                                headers={"Origin": daphne.url}) as ws:
            assert (await ws.receive_json(timeout=10))["kind"] == "hello"
            await asyncio.sleep(2 * HEAD_TIMEOUT)  # a quiet dashboard outlives Twisted's idle timeout
            sdk = clients.openai_client(daphne.url, key)
            out = await asyncio.to_thread(clients.chat_call, sdk, model, [{"role": "user", "content": "hi"}], False)
            assert out.text
            while True:
                msg: dict[str, Any] = await ws.receive_json(timeout=15)
                if msg["kind"] == "requests.logged" and any(model in r["html"] for r in msg["rows"]):
                    return msg

    assert asyncio.run(scenario())["rows"]


def test_twisted_bounds_the_head_at_the_gateways_size_and_a_connection_at_its_idle_time(
        daphne: Server, upstream: Server) -> None:
    key, _ = own_key(upstream)
    legal = {"authorization": f"Bearer {key}", "x-trace": "t" * (HEAD_LIMIT - 1024)}
    assert httpx.get(daphne.url + "/v1/models", headers=legal, timeout=10).status_code == 200
    with socket.create_connection(("127.0.0.1", daphne.port)) as sock:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     + b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 1000) for i in range(HEAD_LIMIT // 1000 + 1)))
        assert read_until_closed(sock, timeout=10) == b"HTTP/1.1 400 Bad Request\r\n\r\n"
    with socket.create_connection(("127.0.0.1", daphne.port)) as idle, \
            socket.create_connection(("127.0.0.1", daphne.port)) as kept:
        started = time.monotonic()
        kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert read_answer(kept, timeout=10)[0] == 200
        assert read_until_closed(idle, timeout=10) == b""  # never sent a byte: closed, no answer
        assert HEAD_TIMEOUT - 0.1 < time.monotonic() - started < HEAD_TIMEOUT + 3
        assert read_until_closed(kept, timeout=10) == b""  # kept alive, then silent as long: closed too


def test_sigterm_drains_an_open_stream_to_its_protocols_end_and_keeps_its_row(upstream: Server) -> None:
    key, name = own_key(upstream)
    gateway = start_gateway(database_url(connection.settings_dict), {"GATEWAY_SHUTDOWN_GRACE": "1"}, server="daphne")
    wire: list[bytes] = []
    streaming = threading.Event()

    def stream() -> None:
        body = {"model": "up-openai_chat/mock-slow-200x50", "messages": [{"role": "user", "content": "hi"}],
                "stream": True}
        with httpx.stream("POST", gateway.url + "/v1/chat/completions", content=orjson.dumps(body), timeout=30,
                          headers={"authorization": f"Bearer {key}", "content-type": "application/json"}) as resp:
            for chunk in resp.iter_raw():
                wire.append(chunk)
                streaming.set()

    client = threading.Thread(target=stream, daemon=True)
    try:
        client.start()
        assert streaming.wait(15)
        gateway.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        ready = httpx.get(gateway.url + "/readyz", timeout=10)
        late = httpx.get(gateway.url + "/v1/models", headers={"authorization": f"Bearer {key}"}, timeout=10)
        exit_code = gateway.proc.wait(15)
    finally:
        gateway.stop(signal.SIGKILL)
    client.join(10)
    assert exit_code == 0
    assert ready.status_code == 503 and late.status_code == 503  # draining: out of the balancer, no new work
    assert terminated("openai_chat", b"".join(wire))  # the stream ended with [DONE], after an error chunk:
    assert "shutting down" in (summary_from_stream(b"".join(wire)).error or "")  # the SDK reads it so
    assert list(RequestLog.objects.filter(client_key_name=name).values_list("status", "error_class")) == [
        (200, "shutting_down")]


def test_sigterm_with_nothing_open_stops_at_once_and_writes_held_back_rows(upstream: Server) -> None:
    key, name = own_key(upstream)
    # The writer would hold the row for a minute: only the stop can have written it.
    gateway = start_gateway(database_url(connection.settings_dict), {"GATEWAY_LOG_BATCH_SECONDS": "60"},
                            server="daphne")
    try:
        out = clients.chat_call(clients.openai_client(gateway.url, key), "up-openai_chat/mock-text",
                                [{"role": "user", "content": "hi"}], False)
        assert out.text
        assert not RequestLog.objects.filter(client_key_name=name).exists()
        stopped_at = time.monotonic()
        gateway.proc.send_signal(signal.SIGTERM)
        assert gateway.proc.wait(10) == 0
        assert time.monotonic() - stopped_at < 3
    finally:
        gateway.stop(signal.SIGKILL)
    assert RequestLog.objects.filter(client_key_name=name, status=200).count() == 1


def wait_for_rows(name: str, count: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while RequestLog.objects.filter(client_key_name=name).count() < count:
        assert time.monotonic() < deadline, f"{count} request-log row(s) of {name} did not arrive"
        time.sleep(0.1)
