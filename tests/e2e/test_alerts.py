"""Alerts reach webhooks: a real receiver on loopback gets what ops configured, once, retried, never in a request's way."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import openai
import pytest

from accounts.config_file import load
from accounts.models import Account
from alerts.models import Delivery, Webhook
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, own_gateway

pytestmark = pytest.mark.django_db(transaction=True)

MSGS: list[Any] = [{"role": "user", "content": "hi"}]
RETRY_SECONDS = 0.5


class Receiver:
    """An HTTP server that records each POST's JSON body and answers the statuses it is given, then 200."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.bodies: list[Any] = []
        self.statuses = list(statuses or [])
        received, statuses_left = self.bodies, self.statuses

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                received.append(json.loads(self.rfile.read(length)))
                self.send_response(statuses_left.pop(0) if statuses_left else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, count: int, timeout: float = 15.0) -> list[Any]:
        deadline = time.monotonic() + timeout
        while len(self.bodies) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.bodies

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def alerting(django_db_setup: Any, django_db_blocker: Any, mock_upstream: Server) -> Iterator[Server]:
    # A short lease: a test's gateway takes over from one an earlier test module left holding it.
    with own_gateway(django_db_blocker, {"GATEWAY_ALERT_RETRY_SECONDS": str(RETRY_SECONDS),
                                         "GATEWAY_ALERT_TIMEOUT": "10", "GATEWAY_LEASE_TTL": "3"}) as server:
        yield server


def disable_one_account(gateway: Server, mock: Server, failing_key: str) -> float:
    """A request whose first account answers 401 (disabled) and second answers; returns its seconds."""

    load(pool_config(mock, {"openai_chat": [failing_key, f"sk-good-{uuid.uuid4().hex[:6]}"]}))
    httpx.post(mock.url + "/_mock/reset")
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=CLIENT_KEY, max_retries=0)
    started = time.monotonic()
    answer = client.chat.completions.create(model="up-openai_chat/mock-text", messages=MSGS)
    took = time.monotonic() - started
    assert answer.choices[0].message.content
    assert Account.objects.get(provider__name="up-openai_chat", status=Account.DISABLED)
    return took


def test_an_account_disabled_by_a_401_is_posted_once_as_json_and_once_for_slack(
        alerting: Server, mock_upstream: Server, receiver: Receiver) -> None:
    slack = Receiver()
    try:
        Webhook.objects.create(name="ops-json", url=receiver.url, on_provider_low=False)
        Webhook.objects.create(name="ops-slack", url=slack.url, format=Webhook.SLACK, on_provider_low=False)
        failing = f"sk-fail-401-{uuid.uuid4().hex[:6]}"
        disable_one_account(alerting, mock_upstream, failing)

        [alert] = receiver.wait_for(1)
        assert alert["event"] == "account_disabled"
        assert alert["provider"] == "up-openai_chat" and alert["account"] == "a0"
        assert alert["status_code"] == 401
        assert alert["text"].startswith("Account a0 of provider up-openai_chat disabled: HTTP 401")
        [message] = slack.wait_for(1)
        assert message == {"text": alert["text"]}
        time.sleep(2.5)  # a few more rounds of the worker: nothing is sent twice
        assert len(receiver.bodies) == 1 and len(slack.bodies) == 1
        for sent in (receiver.bodies, slack.bodies):
            assert failing not in json.dumps(sent) and CLIENT_KEY not in json.dumps(sent)
        assert set(Delivery.objects.values_list("status", flat=True)) == {Delivery.SENT}
    finally:
        slack.close()


def test_a_delivery_the_receiver_refuses_is_tried_again(alerting: Server, mock_upstream: Server) -> None:
    flaky = Receiver(statuses=[500])
    try:
        Webhook.objects.create(name="flaky", url=flaky.url, on_provider_low=False)
        disable_one_account(alerting, mock_upstream, f"sk-fail-401-{uuid.uuid4().hex[:6]}")
        first, second = flaky.wait_for(2)
        assert first == second  # the same alert, sent again
        deadline = time.monotonic() + 5
        while Delivery.objects.get().status != Delivery.SENT and time.monotonic() < deadline:
            time.sleep(0.05)
        delivery = Delivery.objects.get()
        assert (delivery.status, delivery.attempts) == (Delivery.SENT, 2)
    finally:
        flaky.close()


def test_a_provider_left_without_active_accounts_is_alerted(alerting: Server, mock_upstream: Server,
                                                            receiver: Receiver) -> None:
    Webhook.objects.create(name="low", url=receiver.url, on_account_disabled=False, min_active_accounts=2)
    disable_one_account(alerting, mock_upstream, f"sk-fail-401-{uuid.uuid4().hex[:6]}")
    [alert] = receiver.wait_for(1)
    assert alert["event"] == "provider_low"
    assert (alert["provider"], alert["usable_accounts"]) == ("up-openai_chat", 1)
    assert alert["text"] == "Provider up-openai_chat has 1 usable account(s) left."


def test_a_dead_webhook_does_not_slow_a_request(alerting: Server, mock_upstream: Server) -> None:
    # Accepts connections (the kernel's backlog) and never answers: a POST waits for its timeout.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    try:
        Webhook.objects.create(name="dead", url=f"http://127.0.0.1:{silent.getsockname()[1]}/hook")
        took = disable_one_account(alerting, mock_upstream, f"sk-fail-401-{uuid.uuid4().hex[:6]}")
        assert took < 2.0
        # And the next requests are served while the deliveries still wait for their answer.
        time.sleep(1.5)
        client = openai.OpenAI(base_url=alerting.url + "/v1", api_key=CLIENT_KEY, max_retries=0)
        started = time.monotonic()
        client.chat.completions.create(model="up-openai_chat/mock-text", messages=MSGS)
        assert time.monotonic() - started < 2.0
        assert Delivery.objects.filter(status=Delivery.PENDING).exists()
    finally:
        silent.close()


def test_a_key_over_its_token_budget_is_alerted_once_per_window(alerting: Server, mock_upstream: Server,
                                                                receiver: Receiver) -> None:
    Webhook.objects.create(name="budgets", url=receiver.url, on_account_disabled=False, on_provider_low=False)
    key = f"gw-budget-{uuid.uuid4().hex}"
    config = pool_config(mock_upstream)
    config["client_keys"].append({"name": "small-budget", "key": key, "daily_token_limit": 5})
    load(config)
    client = openai.OpenAI(base_url=alerting.url + "/v1", api_key=key, max_retries=0)
    # The first request is admitted under the limit and spends past it; those after it are refused.
    client.chat.completions.create(model="up-openai_chat/mock-text", messages=MSGS)
    refused = 0
    for _ in range(10):
        try:
            client.chat.completions.create(model="up-openai_chat/mock-text", messages=MSGS)
        except openai.RateLimitError:
            refused += 1
            if refused == 3:
                break
        time.sleep(0.1)
    assert refused == 3
    [alert] = receiver.wait_for(1)
    assert alert["event"] == "budget_reached"
    assert (alert["client_key"], alert["unit"], alert["limit"]) == ("small-budget", "tokens", "5 tokens")
    assert alert["text"] == "Client key small-budget reached its budget of 5 tokens in the last 24 hours."
    time.sleep(2.5)
    assert len(receiver.bodies) == 1
    assert key not in json.dumps(receiver.bodies)


def test_a_key_over_its_usd_budget_is_alerted_in_dollars_as_json_and_for_slack(
        alerting: Server, mock_upstream: Server, receiver: Receiver) -> None:
    slack = Receiver()
    try:
        Webhook.objects.create(name="spend", url=receiver.url, on_account_disabled=False, on_provider_low=False)
        Webhook.objects.create(name="spend-slack", url=slack.url, format=Webhook.SLACK, on_account_disabled=False,
                               on_provider_low=False)
        key = f"gw-usd-{uuid.uuid4().hex}"
        config = pool_config(mock_upstream, prices={"mock-*": {"input": 1000, "output": 1000}})  # ~$0.007 an answer
        config["client_keys"].append({"name": "team-03", "key": key, "usd_budget_day": "0.5"})
        load(config)
        client = openai.OpenAI(base_url=alerting.url + "/v1", api_key=key, max_retries=0)
        for _ in range(200):
            try:
                client.chat.completions.create(model="up-openai_chat/mock-text", messages=MSGS)
            except openai.RateLimitError:
                break
        else:
            pytest.fail("never refused")
        [alert] = receiver.wait_for(1)
        assert (alert["event"], alert["client_key"], alert["unit"], alert["limit"]) == (
            "budget_reached", "team-03", "usd", "$0.50")
        assert alert["text"] == "Client key team-03 reached its budget of $0.50 in the last 24 hours."
        assert slack.wait_for(1) == [{"text": alert["text"]}]
    finally:
        slack.close()


@pytest.mark.parametrize("status", [404, 410])
def test_a_permanent_answer_ends_the_tries_and_the_delivery_says_why(alerting: Server, mock_upstream: Server,
                                                                    status: int) -> None:
    gone = Receiver(statuses=[status, status])
    try:
        hook = Webhook.objects.create(name=f"gone-{status}", url=gone.url, on_provider_low=False)
        disable_one_account(alerting, mock_upstream, f"sk-fail-401-{uuid.uuid4().hex[:6]}")
        gone.wait_for(1)
        deadline = time.monotonic() + 10
        while Delivery.objects.get(webhook=hook).status == Delivery.PENDING and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(RETRY_SECONDS * 4)  # past the wait a retry would have had
        delivery = Delivery.objects.get(webhook=hook)
        assert (delivery.status, delivery.attempts, len(gone.bodies)) == (Delivery.FAILED, 1, 1)
        assert f"HTTP {status}" in delivery.last_error and "permanent" in delivery.last_error
        assert gone.url not in delivery.last_error
    finally:
        gone.close()


def staff_client(gateway: Server) -> httpx.Client:
    """A signed-in staff member's browser on the gateway's admin (session cookie, CSRF cookie)."""

    from django.contrib.auth.models import User
    from django.test import Client

    user = User.objects.create_superuser(f"ops-{uuid.uuid4().hex[:6]}", "ops@example.com", "unused-password")
    django_client = Client()
    django_client.force_login(user)
    browser = httpx.Client(base_url=gateway.url, cookies={"sessionid": django_client.cookies["sessionid"].value},
                           timeout=20.0)
    browser.get("/admin/alerts/webhook/")  # sets the CSRF cookie
    return browser


def send_test_alert(browser: httpx.Client, hook: Webhook) -> str:
    """The admin's "Send a test alert" on one webhook; returns the page's messages."""

    answer = browser.post("/admin/alerts/webhook/", follow_redirects=True, headers={
        "Referer": str(browser.base_url) + "/admin/alerts/webhook/"}, data={
        "action": "send_test_alert", "_selected_action": str(hook.pk), "index": "0",
        "csrfmiddlewaretoken": browser.cookies["csrftoken"]})
    assert answer.status_code == 200, answer.text[:500]
    return answer.text


def test_the_admin_sends_a_test_alert_and_says_whether_it_arrived(alerting: Server, receiver: Receiver) -> None:
    slack = Receiver()
    missing = Receiver(statuses=[404])
    try:
        # Wanting no event: a test alert goes whatever a webhook subscribes to (and nothing else comes here).
        wants_none = {"on_account_disabled": False, "on_provider_low": False, "on_budget": False}
        json_hook = Webhook.objects.create(name="ops-json", url=receiver.url, **wants_none)
        slack_hook = Webhook.objects.create(name="ops-slack", url=slack.url, format=Webhook.SLACK, **wants_none)
        wrong_hook = Webhook.objects.create(name="ops-typo", url=missing.url, **wants_none)
        browser = staff_client(alerting)
        try:
            assert "Test alert delivered to ops-json." in send_test_alert(browser, json_hook)
            assert "Test alert delivered to ops-slack." in send_test_alert(browser, slack_hook)
            assert "Test alert to ops-typo failed: HTTP 404" in send_test_alert(browser, wrong_hook)
        finally:
            browser.close()
        [alert] = receiver.bodies
        assert alert["event"] == "test" and alert["webhook"] == "ops-json"
        assert alert["text"] == "Test alert from the LLM gateway to webhook ops-json: alerts reach this channel."
        assert slack.bodies == [{"text": "Test alert from the LLM gateway to webhook ops-slack: alerts reach this "
                                         "channel."}]
        assert len(missing.bodies) == 1
        outcomes = dict(Delivery.objects.values_list("webhook__name", "status"))
        assert outcomes == {"ops-json": Delivery.SENT, "ops-slack": Delivery.SENT, "ops-typo": Delivery.FAILED}
        time.sleep(RETRY_SECONDS * 3)  # the worker does not send them again
        assert (len(receiver.bodies), len(slack.bodies), len(missing.bodies)) == (1, 1, 1)
    finally:
        slack.close()
        missing.close()
