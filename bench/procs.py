"""The processes a benchmark runs: scripted upstream, gateways, bare relay, load generator.

Every child is started in its own session and registered in one
:class:`Processes`; leaving its ``with`` block — normally, on an exception, on
Ctrl-C or on SIGTERM — stops them all (SIGTERM, then SIGKILL after a grace
period). Should the benchmark itself be killed outright, the kernel sends each
child SIGTERM (``PR_SET_PDEATHSIG``). Loopback only.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
BENCH_SECRET_KEY = "bench-only-secret-key-not-for-production"
PR_SET_PDEATHSIG = 1
# The bare relay on Daphne (the baseline), and the gateway on Daphne in ``servers``: no
# per-request access line, like gateway.serve.
DAPHNE_ARGS = ["-b", HOST, "--verbosity", "0"]


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the benchmark dies, even by SIGKILL (Linux)."""

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class Child:
    def __init__(self, name: str, proc: subprocess.Popen[bytes], port: int | None, log: Path) -> None:
        self.name, self.proc, self.port, self.log = name, proc, port, log

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def wait_http(self, path: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                urllib.request.urlopen(self.url + path, timeout=1.0).read()
                return
            except urllib.error.HTTPError:
                return  # it answered
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not answer {path} within {timeout}s:\n{self.tail()}")

    def tail(self, size: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-size:]
        except OSError:
            return ""

    def stop(self, grace: float = 5.0) -> None:
        if self.proc.poll() is not None:
            return
        try:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        except ProcessLookupError:
            pass


class Processes:
    """Owns every child of a benchmark run; stops them all on exit."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.children: list[Child] = []
        self._old_term: Any = None
        self._old_int: Any = None

    def __enter__(self) -> Processes:
        self._old_term = signal.signal(signal.SIGTERM, self._on_term)
        # Ctrl-C must stop the run even when a shell started us with SIGINT ignored (a background job).
        self._old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()
        signal.signal(signal.SIGTERM, self._old_term)
        signal.signal(signal.SIGINT, self._old_int)

    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt  # unwinds through every ``with`` and ``finally``

    def start(self, name: str, args: list[str], env: dict[str, str] | None = None,
              port: int | None = None, stdin: int | None = None, stdout: int | None = None) -> Child:
        log = self.workdir / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(args, cwd=ROOT, env={**os.environ, **(env or {})}, stdin=stdin,
                                    stdout=stdout if stdout is not None else out, stderr=out,
                                    start_new_session=True,  # Ctrl-C reaches us; we stop them in order
                                    preexec_fn=_die_with_parent)
        child = Child(name, proc, port, log)
        self.children.append(child)
        return child

    def stop(self, child: Child) -> None:
        child.stop()
        if child in self.children:
            self.children.remove(child)

    def stop_all(self) -> None:
        for child in reversed(self.children):
            try:
                child.stop()
            except Exception:  # noqa: BLE001 - keep stopping the others
                pass
        self.children.clear()

    # -- the servers

    def mock(self) -> Child:
        port = free_port()
        child = self.start("mockupstream", [sys.executable, "manage.py", "mockupstream", "--host", HOST,
                                            "--port", str(port)], port=port)
        child.wait_http("/v1/models")
        return child

    def gateway(self, name: str, env: dict[str, str]) -> Child:
        port = free_port()
        child = self.start(name, [sys.executable, "-m", "gateway.serve", "--host", HOST, "--port", str(port),
                                  "--log-level", "warning"], env=env, port=port)
        child.wait_http("/healthz")
        return child

    def bare_relay(self, upstream: str) -> Child:
        port = free_port()
        child = self.start("bare-relay", [sys.executable, "-m", "daphne", *DAPHNE_ARGS, "-p", str(port),
                                          "bench.bare_relay:app"], env={"BENCH_UPSTREAM": upstream}, port=port)
        child.wait_http("/healthz")
        return child

    def manage(self, env: dict[str, str], *args: str) -> None:
        """A management command run to completion (migrate, loadconfig)."""

        log = self.workdir / "manage.log"
        with open(log, "ab") as out:
            done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env={**os.environ, **env},
                                  stdout=out, stderr=out, timeout=300)
        if done.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{log.read_text()[-3000:]}")

    def loadgen(self) -> LoadGen:
        child = self.start("loadgen", [sys.executable, "-m", "bench.loadgen"], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE)
        return LoadGen(child)


class LoadGen:
    """The load generator process: one JSON job in, one JSON result out."""

    def __init__(self, child: Child) -> None:
        self.child = child

    @property
    def pid(self) -> int:
        return self.child.pid

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        proc = self.child.proc
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((json.dumps(job) + "\n").encode())
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"load generator died:\n{self.child.tail()}")
        result: dict[str, Any] = json.loads(line)
        if "failed" in result:
            raise RuntimeError(f"load generator job failed: {result['failed']}")
        return result


def gateway_env(database_url: str) -> dict[str, str]:
    """A production-like gateway: DEBUG off (no query log), quiet logs, the bench's own DB.

    The in-memory channel layer whatever the caller's environment says, so that
    runs compare; the benchmark does not measure the dashboard's Redis fan-out.
    """

    return {"DATABASE_URL": database_url, "DEBUG": "0", "SECRET_KEY": BENCH_SECRET_KEY,
            "LOG_LEVEL": "WARNING", "DJANGO_SETTINGS_MODULE": "gateway.settings", "REDIS_URL": ""}
