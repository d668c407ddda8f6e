"""The pool heals itself in real gateway processes: a cool-down ends at its time with no request, a
disabled account comes back by itself once its upstream answers again, and one process at a time
does it, another taking over when it stops or dies.

These tests start their own gateways and are the only ones on the test database while they run
(tests/gateway has no package-wide gateway), so the process holding the ``pool-health`` lease is
always one of theirs.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import aiohttp
import httpx
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.utils import timezone

from accounts import pool
from accounts.config_file import load
from accounts.models import Account, DisableEvent
from accounts.rules import DEFAULT_RULES
from gateway.background.lease import Lease
from gateway.background.poolhealth import LEASE_NAME
from tests.e2e import clients
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, database_url, start_gateway, start_mock

pytestmark = pytest.mark.django_db(transaction=True)

T = TypeVar("T")


@pytest.fixture(scope="module")
def upstream() -> Iterator[Server]:
    server = start_mock()
    yield server
    server.stop()


def gateways(count: int, env: dict[str, str] | None = None) -> list[Server]:
    url = database_url(connection.settings_dict)
    return [start_gateway(url, env) for _ in range(count)]


def holder() -> str:
    """The process id of the lease's holder ("" when nobody holds it)."""

    current = Lease(LEASE_NAME, 0).current()
    return current.rsplit(":", 2)[1] if current else ""


def eventually(check: Callable[[], T], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.05)


def leader_among(servers: list[Server], timeout: float = 15.0) -> Server:
    """The one of ``servers`` that holds the lease (waiting out one a dead earlier process may hold)."""

    by_pid = {str(s.proc.pid): s for s in servers}
    return eventually(lambda: by_pid.get(holder()), timeout, "one of the gateways holds the lease")


@pytest.fixture
def one_gateway(upstream: Server) -> Iterator[Server]:
    [server] = gateways(1)
    try:
        leader_among([server])
        yield server
    finally:
        server.stop()


def staff_session() -> str:
    client = Client()
    client.force_login(User.objects.create_user(f"ops-{uuid.uuid4().hex[:6]}", is_staff=True))
    return client.cookies["sessionid"].value


async def next_enabled(server: Server, session: str, account_id: int, started: asyncio.Event) -> dict[str, Any]:
    """The dashboard websocket's first account.enabled message about ``account_id``."""

    async with aiohttp.ClientSession(cookies={"sessionid": session}) as http, \
            http.ws_connect(server.url.replace("http", "ws") + "/ws/dashboard/", headers={"Origin": server.url}) as ws:
        assert (await ws.receive_json(timeout=10))["kind"] == "hello"
        started.set()
        while True:
            msg = await ws.receive_json(timeout=15)
            if msg["kind"] == "account.enabled" and any(a["id"] == account_id for a in msg["accounts"]):
                return msg


def test_a_cooldown_ends_at_its_time_with_no_request_and_the_dashboard_hears_it(one_gateway: Server,
                                                                               upstream: Server) -> None:
    load(pool_config(upstream, {"openai_chat": ["sk-fail-429-2s-cool", "sk-good-cool-b"]}))
    account = Account.objects.get(provider__name="up-openai_chat", label="a0")
    session = staff_session()
    httpx.post(upstream.url + "/_mock/reset")

    async def scenario() -> tuple[dict[str, Any], dt.datetime]:
        started = asyncio.Event()
        watcher = asyncio.create_task(next_enabled(one_gateway, session, account.pk, started))
        await asyncio.wait_for(started.wait(), 10)
        # One request: the first account answers 429 with Retry-After: 2 and cools down, the second serves it.
        out = await asyncio.to_thread(clients.chat_call, clients.openai_client(one_gateway.url, CLIENT_KEY),
                                      "up-openai_chat/mock-text", [{"role": "user", "content": "hi"}], False)
        assert out.text
        cooling = await asyncio.to_thread(Account.objects.get, pk=account.pk)
        assert cooling.status == Account.COOLING and cooling.cooldown_until is not None
        message = await asyncio.wait_for(watcher, 15)
        return message, cooling.cooldown_until

    message, until = asyncio.run(scenario())
    heard_at = timezone.now()
    account.refresh_from_db()
    event = DisableEvent.objects.get(account=account)
    assert account.status == Account.ACTIVE and account.cooldown_until is None
    assert event.ended_by == "cooldown" and event.ended_at is not None
    assert dt.timedelta(0) <= event.ended_at - until < dt.timedelta(seconds=2)  # a tick is 1 s
    assert heard_at - until < dt.timedelta(seconds=3)
    [row] = message["events"]
    assert "End of cool-down at" in row["html"]
    assert message["accounts"][0]["fields"]["status"] == "Active"
    assert httpx.get(upstream.url + "/_mock/stats").json()["requests"] == 2  # nothing picked it since


def retesting_rules(seconds: float) -> list[dict[str, Any]]:
    """The default rules, with a 401 tested again after ``seconds`` instead of an hour."""

    return [{**rule, "retest_after": seconds} if rule["name"] == "auth_invalid" else rule for rule in DEFAULT_RULES]


def test_an_account_disabled_by_a_401_comes_back_by_itself_once_its_upstream_answers_again(
        one_gateway: Server, upstream: Server) -> None:
    suffix = uuid.uuid4().hex[:8]
    keys = [f"sk-fail-401-{suffix}", f"sk-good-next-{uuid.uuid4().hex[:8]}", f"sk-good-hand-{uuid.uuid4().hex[:8]}"]
    load(pool_config(upstream, {"openai_chat": keys}, rules=retesting_rules(1)))
    revoked, good, by_hand = Account.objects.filter(provider__name="up-openai_chat").order_by("label")
    assert pool.disable_by_hand(by_hand.pk)  # its key works: only ops may bring it back
    httpx.post(upstream.url + "/_mock/reset")

    out = clients.chat_call(clients.openai_client(one_gateway.url, CLIENT_KEY), "up-openai_chat/mock-text",
                            [{"role": "user", "content": "hi"}], False)
    assert out.text  # served by the next account
    revoked.refresh_from_db()
    assert revoked.status == Account.DISABLED and revoked.retest_interval == 1

    def tested(ok: bool) -> Callable[[], bool]:
        def check() -> bool:
            revoked.refresh_from_db()
            return revoked.probe_ok is ok

        return check

    # The first test, a second later, still gets 401: the account stays out, the next test waits twice as long.
    eventually(tested(False), 10, "the first scheduled test ran")
    assert revoked.status == Account.DISABLED and revoked.retest_interval == 2
    assert revoked.probe_summary.startswith("HTTP 401 (auth_invalid)")

    httpx.post(upstream.url + "/_mock/heal", json={"key_suffix": suffix}).raise_for_status()  # the key works again
    healed_at = time.monotonic()
    eventually(tested(True), 10, "a scheduled test found the account answering")
    took = time.monotonic() - healed_at
    assert revoked.status == Account.ACTIVE and revoked.probe_summary == "OK — account re-enabled"
    assert DisableEvent.objects.get(account=revoked).ended_by == "probe"
    assert took < 2 + 1 + 1.5  # the next test (2 s at most away), a tick, the probe itself

    by_hand.refresh_from_db()
    assert by_hand.status == Account.DISABLED and by_hand.probed_at is None  # never tested, never back
    sent = [r["key_suffix"] for r in httpx.get(upstream.url + "/_mock/requests").json()["requests"]]
    assert sent.count(revoked.key_hint[-4:]) >= 3 and by_hand.key_hint[-4:] not in sent


def test_one_process_holds_the_lease_and_another_takes_over_when_it_dies_or_stops(upstream: Server) -> None:
    env = {"GATEWAY_LEASE_TTL": "3"}
    servers = gateways(2, env)
    try:
        first = leader_among(servers)
        [second] = [s for s in servers if s is not first]
        for _ in range(4):  # it keeps the lease: the other never has it while it lives
            time.sleep(0.5)
            assert holder() == str(first.proc.pid)

        first.stop(signal.SIGKILL)  # died: never let go; its lease runs out
        killed_at = time.monotonic()
        assert leader_among([second], timeout=3 + 2) is second
        assert 1.5 < time.monotonic() - killed_at  # not before the dead holder's lease ran out

        servers.append(third := gateways(1, env)[0])
        time.sleep(1.5)
        assert holder() == str(second.proc.pid)  # a newcomer does not take a lease that is held
        second.stop()  # stopped: it lets go at once
        stopped_at = time.monotonic()
        assert leader_among([third], timeout=3) is third
        assert time.monotonic() - stopped_at < 1.5  # the next round, not the lease's end
    finally:
        for server in servers:
            server.stop()
