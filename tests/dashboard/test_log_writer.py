"""Every request gets exactly one log row, with its attempt trace and tokens — also across a shutdown."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from django.db import connection
from django.test import override_settings

from accounts.config_file import load
from accounts.models import Account, RequestLog
from gateway.log import writer as reqlog
from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, database_url, start_gateway

CALLS = {
    "openai_chat": lambda url, model, stream: clients.chat_call(
        clients.openai_client(url, CLIENT_KEY), model, [{"role": "user", "content": "Hello there, gateway"}], stream),
    "anthropic": lambda url, model, stream: clients.messages_call(
        clients.anthropic_client(url, CLIENT_KEY), model, [{"role": "user", "content": "Hello there, gateway"}], stream),
    "responses": lambda url, model, stream: clients.responses_call(
        clients.openai_client(url, CLIENT_KEY), model, [{"role": "user", "content": "Hello there, gateway"}], stream),
}


def rows_for(models: list[str], expected: int, timeout: float = 10.0) -> list[RequestLog]:
    deadline = time.monotonic() + timeout
    while True:
        rows = list(RequestLog.objects.filter(model_requested__in=models))
        if len(rows) >= expected or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


def send_all(url: str, jobs: list[tuple[str, str, bool]], workers: int = 12) -> list[Any]:
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda job: CALLS[job[0]](url, job[1], job[2]), jobs))


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_get_one_row_each_with_their_trace_and_tokens(gateway: Server,
                                                                         mock_upstream: Server) -> None:
    tag = uuid.uuid4().hex[:4]
    # A key answering 403 "insufficient tokens" is retried on the next account, never disabled:
    # requests that draw it first carry a two-attempt trace.
    keys = [f"sk-good-one-{tag}A", f"sk-fail-403-tokens-{tag}B", f"sk-good-two-{tag}C"]
    load(pool_config(mock_upstream, {"anthropic": keys}))
    httpx.post(mock_upstream.url + "/_mock/reset")
    jobs = [(client, f"up-anthropic/mock-text-{tag}-{i}", bool(i % 2))
            for i, client in enumerate(["openai_chat", "anthropic", "responses"] * 12)]
    outcomes = send_all(gateway.url, jobs)
    rows = {r.model_requested: r for r in rows_for([m for _, m, _ in jobs], len(jobs))}

    assert len(rows) == len(jobs) == RequestLog.objects.filter(model_requested__contains=tag).count()
    labels = {a.pk: a.label for a in Account.objects.filter(provider__name="up-anthropic")}
    for (client, model, stream), out in zip(jobs, outcomes, strict=True):
        row = rows[model]
        assert (row.status, row.client_protocol, row.stream, row.error_class) == (200, client, stream, "")
        assert (row.input_tokens, row.output_tokens) == (out.input_tokens, out.output_tokens)
        *failed, last = row.attempts
        assert row.attempt_count == len(row.attempts) <= 2
        assert last["verdict"] == "ok" and last["status"] == 200 and last["account_id"] == row.account_id
        assert labels[row.account_id] in ("a0", "a2")
        for attempt in failed:
            assert (attempt["account_label"], attempt["status"], attempt["verdict"]) == ("a1", 403, "retry")
    upstream_calls = httpx.get(mock_upstream.url + "/_mock/stats").json()["by_key"]
    assert sum(r.attempt_count for r in rows.values()) == sum(upstream_calls[f"...{k[-4:]}"] for k in keys)
    assert any(r.attempt_count == 2 for r in rows.values())


@pytest.mark.django_db(transaction=True)
def test_sigterm_loses_no_buffered_row_and_bodies_are_logged_redacted(mock_upstream: Server) -> None:
    load(pool_config(mock_upstream))
    server = start_gateway(database_url(connection.settings_dict),
                           {"GATEWAY_LOG_BODIES": "1", "GATEWAY_LOG_BODY_LIMIT": "4000"})
    tag = uuid.uuid4().hex[:6]
    try:
        jobs = [(client, f"up-openai_chat/mock-text-{tag}-{i}", bool(i % 2))
                for i, client in enumerate(["openai_chat", "anthropic", "responses"] * 12)]
        secret = f"sk-user-pasted-{tag}-0123456789"
        clients.chat_call(clients.openai_client(server.url, CLIENT_KEY), f"up-openai_chat/mock-text-{tag}-body",
                          [{"role": "user", "content": f"my key is {secret}"}], False)
        send_all(server.url, jobs)
    finally:
        code = server.stop()  # SIGTERM at once: the last rows are still in the writer's queue
    assert code == 0
    models = [m for _, m, _ in jobs]
    assert len(rows_for(models, len(jobs), timeout=0)) == len(jobs)
    body_row = RequestLog.objects.get(model_requested=f"up-openai_chat/mock-text-{tag}-body")
    assert "my key is [redacted]" in body_row.request_body and secret not in body_row.request_body
    assert "Hello! This is the mock upstream." in body_row.response_body
    streamed = RequestLog.objects.filter(model_requested__in=models, stream=True)
    assert streamed and all("Hello" in r.response_body and "data:" in r.response_body for r in streamed)


def test_bodies_are_not_kept_unless_body_logging_is_on() -> None:
    assert reqlog.LogWriter(body_limit=None).keep_body('{"messages": "hello"}') == ""


def test_kept_bodies_are_capped_and_redacted() -> None:
    body = "Bearer gw-abcdefghijklmnop " + "x" * 500
    kept = reqlog.capped(body, 100, ["upstream-secret"])
    assert kept.startswith("Bearer [redacted] ") and len(kept) == 100 and "gw-abc" not in kept
    assert reqlog.capped("the upstream-secret leaked", 100, ["upstream-secret"]) == "the [redacted] leaked"
    # A key-shaped secret straddling the cap is recognised whole, not cut into something unrecognisable.
    straddling = "y" * 95 + " sk-live-0123456789abcdef"  # cut first, "sk-l" would no longer look like a key
    assert "sk-" not in reqlog.LogWriter(body_limit=100).keep_body(straddling)
