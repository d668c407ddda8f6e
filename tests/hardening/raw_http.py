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
