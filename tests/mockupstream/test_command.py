"""``manage.py mockupstream`` as a real process: serves without touching the database."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from .clients import anthropic_client

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_command_serves_until_terminated() -> None:
    port = free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gateway.settings", "SECRET_KEY": "test",
           # An unreachable database: the command must never connect to it.
           "DATABASE_URL": "postgres://nobody:nothing@127.0.0.1:1/none"}
    proc = subprocess.Popen([sys.executable, "-m", "django", "mockupstream", "--port", str(port)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, proc.communicate()
            try:
                assert httpx.get(url + "/v1/models", timeout=1).status_code == 200
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the mock upstream did not start"
                time.sleep(0.1)
        message = anthropic_client(url).messages.create(
            model="mock-text", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
        assert message.content[0].type == "text"
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=10)
    assert f"http://127.0.0.1:{port}".encode() in out, err
