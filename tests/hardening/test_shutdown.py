"""SIGTERM during load: open streams end cleanly in their protocol, and every request keeps its log row."""

from __future__ import annotations

import signal
import threading
import time
import uuid

import httpx
import orjson
import pytest
from django.db import connection

from accounts.config_file import load
from accounts.models import RequestLog
from tests.e2e.conftest import pool_config
from tests.hardening.envelope import check_error_envelope
from tests.hardening.soak_load import Job, request_for, terminated
from tests.servers import Server, database_url, sent_upstream, start_gateway
from tests.translation.anthropic.sdk_readback import summary_from_stream as anthropic_summary
from tests.translation.openai_chat.sdk_readback import summary_from_stream as chat_summary
from tests.translation.responses.sdk_readback import summary_from_stream as responses_summary

pytestmark = pytest.mark.django_db(transaction=True)

STREAM_MODEL = "mock-slow-30x100"  # three seconds of deltas: still streaming when the signal comes
JSON_MODEL = "mock-slow-15x100"
PROTOCOLS = ("openai_chat", "anthropic", "responses")
READ_BACK = {"openai_chat": chat_summary, "anthropic": anthropic_summary, "responses": responses_summary}


class Client(threading.Thread):
    def __init__(self, url: str, job: Job, key: str, timeout: float = 30, hang_up: bool = False) -> None:
        super().__init__(daemon=True)
        self.url, self.job, self.key, self.timeout, self.hang_up = url, job, key, timeout, hang_up
        self.started_streaming = threading.Event()
        self.status = 0
        self.wire = b""
        self.error: str | None = None

    def run(self) -> None:
        path, headers, content = request_for(self.job, self.key)
        chunks = []
        try:
            with httpx.stream("POST", self.url + path, headers=headers, content=content, timeout=self.timeout) as resp:
                self.status = resp.status_code
                for chunk in resp.iter_raw():
                    chunks.append(chunk)
                    self.started_streaming.set()
                    if self.hang_up:
                        break
        except httpx.HTTPError as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.wire = b"".join(chunks)
            self.started_streaming.set()


def own_key(mock: Server) -> tuple[str, str]:
    key = f"gw-shutdown-{uuid.uuid4().hex}"
    config = pool_config(mock)
    config["client_keys"] = [{"name": key[-16:], "key": key}]
    load(config)
    return key, key[-16:]


@pytest.mark.slow  # seconds of load and grace each
@pytest.mark.parametrize("grace, streams_finish", [(10.0, True), (1.0, False)], ids=["finish", "cut-short"])
def test_sigterm_under_load_ends_every_stream_cleanly_and_loses_no_row(mock_upstream: Server, grace: float,
                                                                      streams_finish: bool) -> None:
    key, name = own_key(mock_upstream)
    gateway = start_gateway(database_url(connection.settings_dict), {"GATEWAY_SHUTDOWN_GRACE": str(grace)})
    jobs = [Job(client, f"up-{upstream}", STREAM_MODEL, True) for client in PROTOCOLS for upstream in PROTOCOLS
            for _ in range(3)]
    jobs += [Job(client, "up-anthropic", JSON_MODEL, False) for client in PROTOCOLS]
    clients = [Client(gateway.url, job, key) for job in jobs]
    httpx.post(mock_upstream.url + "/_mock/reset")
    try:
        for c in clients:
            c.start()
        assert all(c.started_streaming.wait(15) for c in clients if c.job.stream)
        # The JSON requests too must be in before the signal: a client thread still connecting
        # then would rightly be refused, which is not what this test is about.
        wait_upstream_saw(mock_upstream, JSON_MODEL, sum(not job.stream for job in jobs))
        gateway.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        late = httpx.post(gateway.url + "/v1/messages", content=request_for(jobs[0], key)[2], timeout=10,
                          headers=request_for(Job("anthropic", "up-anthropic", "mock-text", False), key)[1])
        ready = httpx.get(gateway.url + "/readyz", timeout=10)
        exit_code = gateway.proc.wait(30)
    finally:
        gateway.stop(signal.SIGKILL)
    for c in clients:
        c.join(30)
        assert not c.is_alive(), f"{c.job} still waiting after the gateway exited"
    assert exit_code == 0
    # Arriving while the gateway drains: refused in the caller's envelope, and the balancer is told.
    assert late.status_code == 503 and ready.status_code == 503
    assert late.headers["x-content-type-options"] == ready.headers["x-content-type-options"] == "nosniff"
    check_error_envelope("/v1/messages", late.status_code, late.headers, late.content, client_error=False)
    unclean = [why for ok, why in (describe(c, streams_finish) for c in clients) if not ok]
    assert not unclean, "\n".join(unclean)
    rows = RequestLog.objects.filter(client_key_name=name)
    assert rows.count() == len(jobs)
    assert rows.filter(status=200).count() == len(jobs)  # the streams had started: their status was sent


def wait_upstream_saw(mock: Server, model: str, count: int, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while True:
        seen = len(sent_upstream(mock, model))
        if seen >= count:
            return
        assert time.monotonic() < deadline, f"the upstream saw {seen} of {count} {model} requests"
        time.sleep(0.05)


def describe(c: Client, finished: bool) -> tuple[bool, str]:
    """Whether the client ended as it should: the whole answer, or (cut short) its protocol's own ending."""

    why = f"{c.job}: status {c.status}, error {c.error}, ends {c.wire[-160:]!r}"
    if c.error is not None or c.status != 200:
        return False, why
    if not c.job.stream:  # served within the grace, whole
        return orjson.loads(c.wire)["model"].endswith(JSON_MODEL), why
    if not terminated(c.job.client, c.wire):
        return False, why
    summary = READ_BACK[c.job.client](c.wire)  # the official SDK reads it to the end
    return (summary.error is None) == finished, f"{why} -> {summary.error}"


def test_a_client_that_hangs_up_still_gets_its_log_row(gateway: Server, mock_upstream: Server) -> None:
    key, name = own_key(mock_upstream)
    jobs = [Job(client, "up-openai_chat", "mock-slow-20x100", stream) for client in PROTOCOLS
            for stream in (False, True)]
    # Non-streaming: the client gives up waiting; streaming: it leaves after the first bytes.
    clients = [Client(gateway.url, job, key, timeout=0.7, hang_up=True) for job in jobs]
    for c in clients:
        c.start()
    for c in clients:
        c.join(10)
    assert all((c.error is not None) != c.job.stream for c in clients), [c.error for c in clients]
    deadline = time.monotonic() + 10
    rows = RequestLog.objects.filter(client_key_name=name)
    while rows.count() < len(jobs) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert rows.count() == len(jobs)
    # Left before the answer began (499) or in the middle of the stream (200): both the client's doing.
    assert sorted(rows.values_list("status", "error_class")) == [(200, "client_disconnected")] * 3 + [
        (499, "client_disconnected")] * 3


def test_a_second_signal_stops_at_once_without_waiting_out_the_grace(mock_upstream: Server) -> None:
    key, _ = own_key(mock_upstream)
    gateway = start_gateway(database_url(connection.settings_dict), {"GATEWAY_SHUTDOWN_GRACE": "60"})
    client = Client(gateway.url, Job("openai_chat", "up-openai_chat", "mock-slow-200x100", True), key)
    try:
        client.start()
        assert client.started_streaming.wait(15)
        gateway.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert gateway.proc.poll() is None  # draining: the open stream has 60 s to finish
        stopped_at = time.monotonic()
        gateway.proc.send_signal(signal.SIGTERM)
        gateway.proc.wait(10)
        assert time.monotonic() - stopped_at < 10
    finally:
        gateway.stop(signal.SIGKILL)
    client.join(10)
    assert not client.is_alive()
