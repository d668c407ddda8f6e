"""Reading one HTTP/1.1 answer off a raw socket, for tests that must send what no HTTP client would."""

from __future__ import annotations

import socket

import httpx


def read_answer(sock: socket.socket, timeout: float) -> tuple[int, httpx.Headers, bytes]:
    """Status, headers and body of one answer with a content-length, read until it is whole or the
    server closes (a reset after the answer, from a server dropping what the client still sends, ends it too)."""

    sock.settimeout(timeout)
    raw = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        raw += chunk
        head, sep, body = raw.partition(b"\r\n\r\n")
        if sep and b"content-length:" in head.lower():
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            if len(body) >= length:
                break
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = [line.partition(":") for line in lines[1:]]
    headers = httpx.Headers([(name.strip(), value.strip()) for name, _, value in fields])
    return int(lines[0].split()[1]), headers, body


ENDLESS_HEAD_BUDGET = 64 * 1024 * 1024  # a thousand times the default head limit


def send_endless_head(port: int, path: str, key: str) -> tuple[int, httpx.Headers, bytes, int]:
    """POST ``path`` with header lines that never end, until the server answers or
    ``ENDLESS_HEAD_BUDGET`` bytes are sent: its answer (read until whole or closed) and the bytes sent."""

    line = b"X-Pad: " + b"a" * 8000 + b"\r\n"
    sent = 0
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n".encode())
        try:
            while sent < ENDLESS_HEAD_BUDGET:
                sock.sendall(line)
                sent += len(line)
        except OSError:  # cut off after the answer
            pass
        status, headers, body = read_answer(sock, timeout=10)
    return status, headers, body, sent


def read_until_closed(sock: socket.socket, timeout: float) -> bytes:
    """Everything the server sends until it closes the connection (``socket.timeout`` if it does not)."""

    sock.settimeout(timeout)
    raw = b""
    while chunk := sock.recv(65536):
        raw += chunk
    return raw
