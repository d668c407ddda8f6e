"""The request line and headers are bounded: too large gets 431, too slow 408, and the process does not grow."""

from __future__ import annotations

import socket
import time
from typing import Any

import httpx
import pytest
from django.conf import settings as django_settings
from django.db import connection

from tests.e2e.conftest import CLIENT_KEY
from tests.hardening.envelope import CHAT, MSGS, RESP, check_error_envelope
from tests.hardening.raw_http import read_answer
from tests.servers import Server, database_url, start_gateway

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("path", [CHAT, MSGS, RESP])
def test_headers_past_the_limit_are_refused_with_431_and_the_rest_is_not_read(pool: Any, gateway: Server,
                                                                             path: str) -> None:
    budget = 64 * 1024 * 1024  # a thousand times the limit: the gateway must answer long before this is sent
    line = b"X-Pad: " + b"a" * 8000 + b"\r\n"
    sent = 0
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {CLIENT_KEY}\r\n".encode())
        try:
            while sent < budget:
                sock.sendall(line)
                sent += len(line)
        except OSError:  # cut off after the answer
            pass
        status, headers, body = read_answer(sock, timeout=10)
    assert sent < budget, "the gateway kept reading headers"
    assert status == 431
    message = check_error_envelope(path, status, headers, body)["error"]["message"]
    assert str(django_settings.GATEWAY_MAX_HEAD_BYTES) in message


def test_a_large_but_legal_head_is_served_on_a_kept_alive_connection(pool: Any, gateway: Server) -> None:
    headers = {"authorization": f"Bearer {CLIENT_KEY}", **{f"x-trace-{i}": "t" * 1000 for i in range(40)}}
    with httpx.Client(base_url=gateway.url, timeout=10) as client:
        for _ in range(2):
            resp = client.get("/v1/models", headers=headers)
            assert resp.status_code == 200 and resp.json()["data"]


def test_a_head_that_never_completes_is_answered_408_and_closed(mock_upstream: Server) -> None:
    gateway = start_gateway(database_url(connection.settings_dict), {"GATEWAY_HEAD_TIMEOUT": "1"})
    try:
        with socket.create_connection(("127.0.0.1", gateway.port)) as idle, \
                socket.create_connection(("127.0.0.1", gateway.port)) as partial:
            partial.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ")
            started = time.monotonic()
            status, headers, body = read_answer(partial, timeout=10)
            assert status == 408 and time.monotonic() - started < 5
            check_error_envelope(MSGS, status, headers, body)
            idle.settimeout(10)
            assert idle.recv(65536).startswith(b"HTTP/1.1 408")  # connected, never sent a byte
            assert idle.recv(65536) == b""  # then closed
    finally:
        gateway.stop()
