"""Real processes on loopback ports for end-to-end tests: the scripted upstream and the gateway.

The gateway runs on ``python -m gateway.serve`` (uvicorn), or on Daphne's own command line
(``daphne gateway.asgi:application``) when ``GATEWAY_TEST_SERVER=daphne``: ``.ci/run`` runs the
end-to-end tests a second time that way.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ("uvicorn", "daphne")
SERVER = os.environ.get("GATEWAY_TEST_SERVER", "uvicorn")  # the server start_gateway runs unless told
if SERVER not in SERVERS:
    raise RuntimeError(f"GATEWAY_TEST_SERVER={SERVER!r}: expected one of {', '.join(SERVERS)}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.stdout.read().decode() if proc.stdout else ""
            raise RuntimeError(f"server exited with {proc.returncode}:\n{out[-4000:]}")
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout}s")


def database_url(settings_dict: dict[str, Any]) -> str:
    if settings_dict["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{settings_dict['NAME']}"
    user = settings_dict.get("USER") or "postgres"
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    pw = f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else ""
    return f"postgres://{user}{pw}@{host}:{port}/{settings_dict['NAME']}"


class Server:
    def __init__(self, args: list[str], port: int, env: dict[str, str], health: str, kind: str = "") -> None:
        self.port = port
        self.kind = kind  # a gateway's server: "uvicorn" or "daphne"
        self.url = f"http://127.0.0.1:{port}"
        log = open(ROOT / "artifacts" / f"server-{port}.log", "wb") if (ROOT / "artifacts").is_dir() else subprocess.DEVNULL
        self.proc = subprocess.Popen(args, cwd=ROOT, env={**os.environ, **env}, stdout=log,
                                     stderr=subprocess.STDOUT)
        wait_http(self.url + health, self.proc)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def start_mock() -> Server:
    port = free_port()
    return Server([sys.executable, "manage.py", "mockupstream", "--host", "127.0.0.1", "--port", str(port)],
                  port, {}, "/v1/models")


def received(mock: Server) -> list[dict[str, Any]]:
    """The requests the scripted upstream recorded last (``GET /_mock/requests``), oldest first."""

    requests: list[dict[str, Any]] = httpx.get(mock.url + "/_mock/requests").json()["requests"]
    return requests


def sent_upstream(mock: Server, marker: str) -> list[str]:
    """Model names of the requests the scripted upstream received whose model contains ``marker``."""

    return [r["body"]["model"] for r in received(mock)
            if isinstance(r.get("body"), dict) and marker in str(r["body"].get("model", ""))]


def gateway_command(server: str, port: int) -> list[str]:
    """The command line a deployment would run, quiet but for warnings."""

    if server == "daphne":  # Daphne's own command line, no wrapper: what README shows
        return [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "-v", "0",
                "gateway.asgi:application"]
    return [sys.executable, "-m", "gateway.serve", "--port", str(port), "--log-level", "warning"]


def start_gateway(db_url: str, extra_env: dict[str, str] | None = None, server: str | None = None) -> Server:
    port = free_port()
    env = {"DATABASE_URL": db_url, "GATEWAY_CONFIG_TTL": "0", "GATEWAY_POOL_TTL": "0", "GATEWAY_KEEPALIVE_SECONDS": "1",
           "SECRET_KEY": os.environ["SECRET_KEY"], **(extra_env or {})}
    server = server or SERVER
    return Server(gateway_command(server, port), port, env, "/healthz", server)


@contextlib.contextmanager
def gateway_processes(db_url: str, count: int, extra_env: dict[str, str] | None = None) -> Iterator[list[Server]]:
    """``count`` gateway processes sharing one database; all stopped on exit, even if one fails to start."""

    started: list[Server] = []
    try:
        for _ in range(count):
            started.append(start_gateway(db_url, extra_env))
        yield started
    finally:
        for server in started:
            server.stop()
