"""The request line and headers are bounded in size and in time, on either server.

uvicorn (``gateway.serve``) answers 431 and 408 in the caller's error envelope. Daphne applies
Twisted's own limits at the gateway's values (``gateway.edge.daphne``): past the size a bare 400, after
the time the connection closed without an answer. Either way the rest is not read and the
connection is closed. (``GATEWAY_TEST_SERVER=daphne`` runs these on Daphne.)
"""

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
from tests.hardening.raw_http import ENDLESS_HEAD_BUDGET, read_answer, read_until_closed, send_endless_head
from tests.servers import Server, database_url, start_gateway

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("path", [CHAT, MSGS, RESP])
def test_headers_past_the_limit_are_refused_and_the_rest_is_not_read(pool: Any, gateway: Server, path: str) -> None:
    status, headers, body, sent = send_endless_head(gateway.port, path, CLIENT_KEY)
    assert sent < ENDLESS_HEAD_BUDGET, "the gateway kept reading headers"
    if gateway.kind == "daphne":  # Twisted's own refusal, the same for every path
        assert (status, body) == (400, b"")
        return
    assert status == 431
    message = check_error_envelope(path, status, headers, body)["error"]["message"]
    assert str(django_settings.GATEWAY_MAX_HEAD_BYTES) in message


@pytest.mark.parametrize("path", [CHAT, MSGS])
def test_a_head_past_the_limit_that_arrives_in_one_read_is_refused_too(pool: Any, gateway: Server,
                                                                       path: str) -> None:
    # Whole, with a small body, in one write: the head is complete when the server first sees it.
    pad = "".join(f"X-Pad-{i}: {'a' * 1000}\r\n" for i in range(100))  # 100 KB of headers
    body = b'{"model": "x", "messages": []}'
    request = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {CLIENT_KEY}\r\n"
               f"x-api-key: {CLIENT_KEY}\r\n{pad}Content-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        sock.sendall(request)
        status, headers, answer = read_answer(sock, timeout=10)
    if gateway.kind == "daphne":  # Twisted's own refusal
        assert (status, answer) == (400, b"")
        return
    assert status == 431
    check_error_envelope(path, status, headers, answer)


def test_a_large_but_legal_head_is_served_on_a_kept_alive_connection(pool: Any, gateway: Server) -> None:
    # 41 KB: under the gateway's 64 KiB, over Twisted's own default of 16 KiB.
    headers = {"authorization": f"Bearer {CLIENT_KEY}", **{f"x-trace-{i}": "t" * 1000 for i in range(40)}}
    with httpx.Client(base_url=gateway.url, timeout=10) as client:
        for _ in range(2):
            resp = client.get("/v1/models", headers=headers)
            assert resp.status_code == 200 and resp.json()["data"]


def test_a_head_that_never_completes_is_cut_off_and_closed(mock_upstream: Server) -> None:
    gateway = start_gateway(database_url(connection.settings_dict), {"GATEWAY_HEAD_TIMEOUT": "1"})
    try:
        with socket.create_connection(("127.0.0.1", gateway.port)) as idle, \
                socket.create_connection(("127.0.0.1", gateway.port)) as partial:
            partial.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ")
            started = time.monotonic()
            if gateway.kind == "daphne":  # Twisted's idle timeout: closed without an answer
                assert read_until_closed(partial, timeout=10) == b""
                assert 0.9 < time.monotonic() - started < 5
                assert read_until_closed(idle, timeout=10) == b""  # connected, never sent a byte
                return
            status, headers, body = read_answer(partial, timeout=10)
            assert status == 408 and time.monotonic() - started < 5
            check_error_envelope(MSGS, status, headers, body)
            idle.settimeout(10)
            assert idle.recv(65536).startswith(b"HTTP/1.1 408")  # connected, never sent a byte
            assert idle.recv(65536) == b""  # then closed
    finally:
        gateway.stop()
