"""The pool turns an upstream's bad day into a retry the client never sees.

The scripted upstream answers by account key (``fail-429`` …), so each test
builds a pool whose accounts fail in a known order; LRU picks fresh accounts in
creation order.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import anthropic
import httpx
import openai
import pytest

from accounts.config_file import load
from accounts.models import Account, DisableEvent, RequestLog
from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, free_port, seen

pytestmark = pytest.mark.django_db(transaction=True)

CLIENTS = ["openai_chat", "anthropic", "responses"]
STREAM = [False, True]
MSGS = [{"role": "user", "content": "hi"}]


def call(gateway: Server, client_proto: str, model: str, stream: bool) -> clients.Outcome:
    if client_proto == "openai_chat":
        return clients.chat_call(clients.openai_client(gateway.url, CLIENT_KEY), model, MSGS, stream)
    if client_proto == "anthropic":
        return clients.messages_call(clients.anthropic_client(gateway.url, CLIENT_KEY), model, MSGS, stream)
    return clients.responses_call(clients.openai_client(gateway.url, CLIENT_KEY), model, MSGS, stream)


def setup_pool(gateway: Server, mock: Server, upstream: str, keys: list[str], **extra: Any) -> None:
    load(pool_config(mock, {upstream: keys}, **extra))
    seen(gateway)
    httpx.post(mock.url + "/_mock/reset")


def accounts(upstream: str) -> list[Account]:
    return list(Account.objects.filter(provider__name=f"up-{upstream}").order_by("id"))


def unique(model: str) -> str:
    """A model name only this test uses (the upstream answers it as plain text), so its log row is ours."""

    return f"{model}-{uuid.uuid4().hex[:8]}"


def wait_for_log_row(model: str, timeout: float = 5.0) -> RequestLog:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = RequestLog.objects.filter(model_requested=model).first()
        if row is not None:
            return row
        time.sleep(0.05)
    raise AssertionError(f"no request-log row for {model}")


@pytest.mark.parametrize("stream", STREAM, ids=["json", "stream"])
@pytest.mark.parametrize("client_proto", CLIENTS)
def test_429_then_401_then_ok_serves_from_the_third_account(gateway: Server, mock_upstream: Server,
                                                           client_proto: str, stream: bool) -> None:
    setup_pool(gateway, mock_upstream, "anthropic", ["sk-fail-429-a", "sk-fail-401-b", "sk-good-c"])
    model = unique("up-anthropic/mock-text")
    out = call(gateway, client_proto, model, stream)
    assert out.text == "Hello! This is the mock upstream."
    a429, a401, ok = accounts("anthropic")
    assert a429.status == Account.COOLING  # Retry-After: 30 became a cool-down
    assert a401.status == Account.DISABLED
    assert ok.status == Account.ACTIVE
    events = {e.account_id: e for e in DisableEvent.objects.all()}
    assert len(events) == 2
    assert events[a429.pk].tier == "tier3_account_exhausted" and events[a429.pk].status_code == 429
    assert events[a401.pk].tier == "auth_invalid" and events[a401.pk].status_code == 401
    assert "sk-fail" not in events[a429.pk].excerpt + events[a401.pk].excerpt
    row = wait_for_log_row(model)
    assert [a["verdict"] for a in row.attempts] == ["disable", "disable", "ok"]
    assert [a["status"] for a in row.attempts] == [429, 401, 200]
    assert row.account_id == ok.pk and row.status == 200


@pytest.mark.parametrize("stream", STREAM, ids=["json", "stream"])
@pytest.mark.parametrize("client_proto", CLIENTS)
def test_estimated_cost_is_returned_to_the_client_untouched(gateway: Server, mock_upstream: Server,
                                                             client_proto: str, stream: bool) -> None:
    setup_pool(gateway, mock_upstream, "openai_chat", ["sk-fail-403-cost-a", "sk-good-b"])
    with pytest.raises((openai.APIStatusError, anthropic.APIStatusError)) as info:
        call(gateway, client_proto, "up-openai_chat/mock-text", stream)
    assert info.value.status_code == 403
    assert "estimated cost" in str(info.value).lower()
    assert DisableEvent.objects.count() == 0
    first, second = accounts("openai_chat")
    assert first.status == second.status == Account.ACTIVE
    assert second.last_used_at is None  # no other account was tried


@pytest.mark.parametrize("stream", STREAM, ids=["json", "stream"])
@pytest.mark.parametrize("client_proto", CLIENTS)
def test_insufficient_tokens_moves_on_without_disabling(gateway: Server, mock_upstream: Server,
                                                       client_proto: str, stream: bool) -> None:
    setup_pool(gateway, mock_upstream, "responses", ["sk-fail-403-tokens-a", "sk-good-b"])
    out = call(gateway, client_proto, "up-responses/mock-text", stream)
    assert out.text
    assert DisableEvent.objects.count() == 0
    assert all(a.status == Account.ACTIVE for a in accounts("responses"))


@pytest.mark.parametrize("stream", STREAM, ids=["json", "stream"])
@pytest.mark.parametrize("client_proto", CLIENTS)
def test_refused_connection_moves_on_without_blaming_the_account(gateway: Server, mock_upstream: Server,
                                                                client_proto: str, stream: bool) -> None:
    # Two providers can't share one account list, so the dead one gets its own base URL via a pattern alias.
    dead = f"http://127.0.0.1:{free_port()}/v1"
    config = pool_config(mock_upstream, {"openai_chat": ["sk-good-a"]})
    config["providers"].append({"name": "dead", "protocol": "openai_chat", "base_url": dead, "models": [],
                                "connect_timeout": 2.0,
                                "accounts": [{"label": "d0", "api_key": "sk-good-dead"}]})
    load(config)
    seen(gateway)
    with pytest.raises((openai.APIStatusError, anthropic.APIStatusError)) as info:
        call(gateway, client_proto, "dead/mock-text", stream)
    assert info.value.status_code == 502
    dead_account = Account.objects.get(label="d0")
    assert dead_account.status == Account.ACTIVE
    assert DisableEvent.objects.count() == 0


@pytest.mark.parametrize("client_proto", CLIENTS)
def test_error_inside_a_200_stream_before_content_is_retried(gateway: Server, mock_upstream: Server,
                                                             client_proto: str) -> None:
    setup_pool(gateway, mock_upstream, "anthropic", ["sk-fail-stream-error-a", "sk-good-b"])
    model = unique("up-anthropic/mock-text")
    out = call(gateway, client_proto, model, stream=True)
    assert out.text == "Hello! This is the mock upstream."
    row = wait_for_log_row(model)
    assert len(row.attempts) == 2 and row.attempts[-1]["verdict"] == "ok"


@pytest.mark.parametrize("stream", STREAM, ids=["json", "stream"])
@pytest.mark.parametrize("client_proto", CLIENTS)
def test_all_accounts_bad_is_503_in_the_callers_envelope(gateway: Server, mock_upstream: Server,
                                                        client_proto: str, stream: bool) -> None:
    """...and 529 overloaded_error in Anthropic's, as the Claude Code gateway protocol's table has it."""

    setup_pool(gateway, mock_upstream, "openai_chat", ["sk-fail-429-a", "sk-fail-402-b"])
    with pytest.raises((openai.APIStatusError, anthropic.APIStatusError)) as info:
        call(gateway, client_proto, "up-openai_chat/mock-text", stream)
    body = info.value.body
    if client_proto == "anthropic":
        assert info.value.status_code == 529
        assert isinstance(body, dict) and body["error"]["type"] == "overloaded_error", body
    else:
        assert info.value.status_code == 503
    assert DisableEvent.objects.count() == 2


@pytest.mark.parametrize(("key", "stream", "status"), [
    ("sk-fail-500-a", False, 500), ("sk-fail-500-a", True, 500),
    ("sk-fail-stream-overloaded-a", False, 529),  # Anthropic's HTTP 529
    ("sk-fail-stream-overloaded-a", True, 529),  # ...and its overloaded_error event inside a 200 stream
], ids=["500-json", "500-stream", "529-json", "529-in-stream"])
@pytest.mark.parametrize("client_proto", CLIENTS)
def test_a_server_error_or_an_overload_goes_to_the_next_account_without_disabling(
        gateway: Server, mock_upstream: Server, client_proto: str, key: str, stream: bool, status: int) -> None:
    setup_pool(gateway, mock_upstream, "anthropic", [key, "sk-good-b"])
    model = unique("up-anthropic/mock-text")
    out = call(gateway, client_proto, model, stream)
    assert out.text == "Hello! This is the mock upstream."
    assert DisableEvent.objects.count() == 0
    assert all(a.status == Account.ACTIVE for a in accounts("anthropic"))
    row = wait_for_log_row(model)
    assert [(a["status"], a["verdict"], a["tier"]) for a in row.attempts] == [
        (status, "retry", "upstream_unavailable"), (200, "ok", "")]


def test_when_every_account_is_overloaded_the_client_gets_the_upstreams_529(gateway: Server,
                                                                          mock_upstream: Server) -> None:
    setup_pool(gateway, mock_upstream, "anthropic", ["sk-fail-stream-overloaded-a", "sk-fail-stream-overloaded-b"])
    with pytest.raises(anthropic.APIStatusError) as info:
        call(gateway, "anthropic", "up-anthropic/mock-text", stream=True)
    assert info.value.status_code == 529 and "Overloaded" in str(info.value)
    assert DisableEvent.objects.count() == 0


def test_failed_attempts_count_against_their_accounts_in_the_usage_figures(gateway: Server,
                                                                          mock_upstream: Server) -> None:
    from django.contrib.auth.models import User
    from django.test import Client
    from django.urls import reverse

    from dashboard.models import UsageBucket

    setup_pool(gateway, mock_upstream, "openai_chat", ["sk-fail-500-a", "sk-fail-429-b", "sk-good-c"])
    model = unique("up-openai_chat/mock-text")
    assert call(gateway, "openai_chat", model, stream=False).text
    row = wait_for_log_row(model)
    failing, exhausted, good = accounts("openai_chat")
    assert [a["account_id"] for a in row.attempts] == [failing.pk, exhausted.pk, good.pk]
    assert [(a.requests, a.errors) for a in (failing, exhausted, good)] == [(1, 1), (1, 1), (1, 0)]
    assert good.input_tokens > 0 and failing.input_tokens == exhausted.input_tokens == 0
    buckets = {b.account_id: (b.requests, b.errors, b.retried) for b in UsageBucket.objects.all()}
    assert buckets[failing.pk] == buckets[exhausted.pk] == (1, 1, 1) and buckets[good.pk] == (1, 0, 0)
    client = Client()
    client.force_login(User.objects.create_user("ops", is_staff=True))
    page = client.get(reverse("dashboard:usage") + "?window=1h").content.decode()
    cells = page.split(f'data-account-id="{failing.pk}"', 1)[1].split("</tr>", 1)[0]
    assert 'data-field="errors">1<' in cells
