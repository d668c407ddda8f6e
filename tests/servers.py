"""Real processes on loopback ports for end-to-end tests: the scripted upstream and the gateway.

The gateway runs on ``python -m gateway.serve`` (uvicorn), or on Daphne's own command line
(``daphne gateway.asgi:application``) when ``GATEWAY_TEST_SERVER=daphne``: ``.ci/run`` runs the
end-to-end tests on PostgreSQL + Redis that way.

A gateway caches its configuration and (on SQLite) its account pool for a few seconds and
re-reads them in the background (``GATEWAY_CONFIG_TTL``, ``GATEWAY_POOL_TTL``). The tests'
gateways run with TTLs of 0 (every request sees the database as it is) unless
``GATEWAY_TEST_TTLS=production`` is set: then they run with production's TTLs, and a test that
changes the pool or the configuration from outside waits with :func:`seen` until the gateway
has re-read them.
"""

from __future__ import annotations

import contextlib
import itertools
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

from gateway.options import Options

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ("uvicorn", "daphne")
SERVER = os.environ.get("GATEWAY_TEST_SERVER", "uvicorn")  # the server start_gateway runs unless told
if SERVER not in SERVERS:
    raise RuntimeError(f"GATEWAY_TEST_SERVER={SERVER!r}: expected one of {', '.join(SERVERS)}")

# TTLs of 0: each request re-reads configuration and pool, so a change made between requests is seen at once.
EXACT_TTLS = {"GATEWAY_CONFIG_TTL": "0", "GATEWAY_POOL_TTL": "0"}
# Production's (the settings' defaults): served from memory, re-read in the background once stale.
PRODUCTION_TTLS = {"GATEWAY_CONFIG_TTL": str(Options.config_ttl), "GATEWAY_POOL_TTL": str(Options.pool_ttl)}


def ttls_from_env() -> dict[str, str]:
    """The TTLs of the tests' gateways: ``GATEWAY_TEST_TTLS=production`` or (default) ``exact``."""

    mode = os.environ.get("GATEWAY_TEST_TTLS", "exact")
    if mode not in ("exact", "production"):
        raise ValueError(f"GATEWAY_TEST_TTLS must be exact or production, not {mode!r}")
    return PRODUCTION_TTLS if mode == "production" else EXACT_TTLS


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
        self.config_ttl = float(env.get("GATEWAY_CONFIG_TTL", 0))
        self.pool_ttl = float(env.get("GATEWAY_POOL_TTL", 0))
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


def start_gateway(db_url: str, extra_env: dict[str, str] | None = None, ttls: dict[str, str] | None = None,
                  server: str | None = None) -> Server:
    """A gateway on ``db_url``; ``ttls``: EXACT_TTLS or PRODUCTION_TTLS, else as GATEWAY_TEST_TTLS says;
    ``server``: "uvicorn" or "daphne", else as GATEWAY_TEST_SERVER says."""

    port = free_port()
    env = {"DATABASE_URL": db_url, **(ttls or ttls_from_env()), "GATEWAY_KEEPALIVE_SECONDS": "1",
           "SECRET_KEY": os.environ["SECRET_KEY"], **(extra_env or {})}
    server = server or SERVER
    return Server(gateway_command(server, port), port, env, "/healthz", server)


@contextlib.contextmanager
def own_gateway(django_db_blocker: Any, extra_env: dict[str, str] | None = None,
                **start: Any) -> Iterator[Server]:
    """A gateway on the test database (``start_gateway``'s arguments), stopped on exit."""

    from django.db import connection

    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    server = start_gateway(url, extra_env, **start)
    try:
        yield server
    finally:
        server.stop()


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


_marks = itertools.count()
SEEN_KEY = "gw-seen-key"


def seen(*gateways: Server, timeout: float = 15.0) -> None:
    """Wait until each gateway has seen every change made to the database so far; at once when its TTLs are 0.

    A mark is written after the changes: a provider of its own with one account, behind an
    address nothing listens on. A request for the mark's model is then answered 404 until the
    gateway's configuration has been re-read since the mark was written (providers are read in one
    query, before aliases and keys), 503 (no account) until its pool has, and 502 (the account's
    upstream refused the connection) once both have. No upstream is called and no account blamed;
    the requests are logged under the client key ``seen``.
    """

    from accounts.config_file import load

    waiting = [g for g in gateways if g.config_ttl > 0 or g.pool_ttl > 0]
    if not waiting:
        return
    mark = f"seen-{os.getpid()}-{next(_marks)}"
    load({"providers": [{"name": mark, "protocol": "openai_chat", "base_url": "http://127.0.0.1:1/v1", "models": [],
                         "connect_timeout": 1.0, "accounts": [{"label": "mark", "api_key": "sk-mark"}]}],
          "client_keys": [{"name": "seen", "key": SEEN_KEY}]})
    body = {"model": f"{mark}/any", "messages": [{"role": "user", "content": "."}]}
    deadline = time.monotonic() + timeout
    for gateway in waiting:
        while True:
            answer = httpx.post(gateway.url + "/v1/chat/completions", json=body, timeout=10.0,
                                headers={"authorization": f"Bearer {SEEN_KEY}"})
            if answer.status_code == 502:
                break
            if answer.status_code not in (404, 503) or time.monotonic() > deadline:
                raise AssertionError(f"{gateway.url} had not seen the changes after {timeout} s: "
                                     f"{answer.status_code} {answer.text[:300]}")
            time.sleep(0.05)
