"""Request bodies on every URL are bounded in size and in time before they are read; compressed API
bodies are decoded within the same bound.

Found by a red team: a 200 MB form POST to /admin/login/ grew the process by ~750 MB (and kept 522
MB); /dashboard/ read 200 MB before its 403; slow bodies were never timed out (15 of 15 still open at
50 s); a 100 KB gzip body inflates to 100 MB.
"""

from __future__ import annotations

import gzip
import socket
import time
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
import zstandard

from accounts.config_file import load
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.hardening.envelope import CHAT, MSGS, check_error_envelope
from tests.hardening.raw_http import read_answer
from tests.servers import Server, own_gateway

pytestmark = pytest.mark.django_db(transaction=True)

MB = 1024 * 1024
BODY_TIMEOUT = 2.0


@pytest.fixture(scope="module")
def body_gateway(django_db_setup: Any, django_db_blocker: Any, mock_upstream: Server) -> Iterator[Server]:
    with own_gateway(django_db_blocker, {"LOG_LEVEL": "ERROR", "GATEWAY_BODY_TIMEOUT": str(BODY_TIMEOUT)}) as server:
        yield server


@pytest.fixture
def pool(transactional_db: Any, mock_upstream: Server, body_gateway: Server) -> None:
    load(pool_config(mock_upstream))


def peak_rss(server: Server) -> int:
    with open(f"/proc/{server.proc.pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def chunked_upload(server: Server, path: str, total: int, content_type: str) -> tuple[int, int]:
    """POST ``total`` bytes chunked (no declared length) until the server answers; (status, bytes sent)."""

    piece = b"a=" + b"x" * (256 * 1024 - 2)
    sent = 0
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n".encode())
        try:
            while sent < total:
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                sent += len(piece)
        except OSError:
            pass  # cut off after the answer
        status, _, _ = read_answer(sock, timeout=10)
    return status, sent


@pytest.mark.parametrize("path", ["/admin/login/", "/dashboard/", "/static/admin/css/base.css", "/"])
def test_a_200_mb_page_body_is_refused_before_it_is_read(pool: None, body_gateway: Server, path: str) -> None:
    before = peak_rss(body_gateway)
    status, sent = chunked_upload(body_gateway, path, 200 * MB, "application/x-www-form-urlencoded")
    assert status == 413
    assert sent < 100 * MB  # refused at the limit, not after the whole body
    assert peak_rss(body_gateway) - before <= 50 * MB


def test_a_declared_length_over_the_page_limit_is_refused_before_any_body_byte(pool: None,
                                                                              body_gateway: Server) -> None:
    with socket.create_connection(("127.0.0.1", body_gateway.port)) as sock:
        sock.sendall(f"POST /admin/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {200 * MB}\r\n"
                     "Content-Type: application/x-www-form-urlencoded\r\n\r\n".encode())
        status, headers, body = read_answer(sock, timeout=5)
    assert status == 413 and b"exceeds the limit" in body


@pytest.mark.parametrize("path", [CHAT, "/admin/login/"])
def test_a_body_trickled_in_is_cut_off_with_408(pool: None, body_gateway: Server, path: str) -> None:
    with socket.create_connection(("127.0.0.1", body_gateway.port)) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n"
                     f"Authorization: Bearer {CLIENT_KEY}\r\nContent-Type: application/json\r\n\r\n".encode())
        started = time.monotonic()
        try:
            for _ in range(30):  # a byte a second: far below any real client
                sock.sendall(b"{")
                time.sleep(0.5)
        except OSError:
            pass
        status, _, body = read_answer(sock, timeout=10)
        waited = time.monotonic() - started
    assert status == 408 and b"did not arrive in time" in body
    assert BODY_TIMEOUT <= waited < BODY_TIMEOUT + 3


def test_a_head_without_a_body_byte_is_cut_off(pool: None, body_gateway: Server) -> None:
    with socket.create_connection(("127.0.0.1", body_gateway.port)) as sock:
        sock.sendall(f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 50\r\n"
                     f"Authorization: Bearer {CLIENT_KEY}\r\nContent-Type: application/json\r\n\r\n".encode())
        status, headers, body = read_answer(sock, timeout=BODY_TIMEOUT + 5)
    assert status == 408
    check_error_envelope(CHAT, status, headers, body)


def chat_body() -> bytes:
    return orjson.dumps({"model": "up-openai_chat/mock-text", "messages": [{"role": "user", "content": "Hi"}]})


@pytest.mark.parametrize("coding, encode", [
    ("gzip", gzip.compress),
    ("deflate", zlib.compress),
    ("zstd", lambda b: zstandard.ZstdCompressor(level=3).compress(b)),  # what Codex sends
])
def test_a_compressed_api_body_is_decoded(pool: None, body_gateway: Server, coding: str, encode: Any) -> None:
    response = httpx.post(body_gateway.url + CHAT, content=encode(chat_body()), timeout=20,
                          headers={"authorization": f"Bearer {CLIENT_KEY}", "content-type": "application/json",
                                   "content-encoding": coding})
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "Hello! This is the mock upstream."


@pytest.mark.parametrize("coding, bomb", [
    ("gzip", lambda: gzip.compress(b" " * (100 * MB), 9)),
    ("zstd", lambda: zstandard.ZstdCompressor(level=19).compress(b" " * (100 * MB))),
])
def test_a_compression_bomb_is_refused_within_the_limit(pool: None, body_gateway: Server, coding: str,
                                                       bomb: Any) -> None:
    payload = bomb()
    assert len(payload) < 200 * 1024
    before = peak_rss(body_gateway)
    response = httpx.post(body_gateway.url + MSGS, content=payload, timeout=20,
                          headers={"x-api-key": CLIENT_KEY, "content-type": "application/json",
                                   "content-encoding": coding})
    check_error_envelope(MSGS, response.status_code, response.headers, response.content)
    assert response.status_code == 413
    assert peak_rss(body_gateway) - before <= 50 * MB


@pytest.mark.parametrize("coding, status", [("gzip", 400), ("br", 415)])
def test_a_broken_or_unknown_coding_gets_a_clear_error(pool: None, body_gateway: Server, coding: str,
                                                       status: int) -> None:
    response = httpx.post(body_gateway.url + CHAT, content=b"not compressed at all", timeout=10,
                          headers={"authorization": f"Bearer {CLIENT_KEY}", "content-encoding": coding})
    check_error_envelope(CHAT, response.status_code, response.headers, response.content)
    assert response.status_code == status
