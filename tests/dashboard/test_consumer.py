"""The dashboard websocket turns pool events into rows and numbers for the pages (in-process)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import Client

from accounts import pool
from accounts.events import group
from accounts.models import Provider
from gateway.asgi import application
from tests.dashboard.conftest import make_account, record, write

pytestmark = pytest.mark.django_db(transaction=True)


def communicator(client: Client) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, "/ws/dashboard/", headers=[
        (b"origin", b"http://127.0.0.1"), (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())])


def test_logged_requests_arrive_as_rendered_rows_with_fresh_account_numbers(staff_client: Client,
                                                                           provider: Provider) -> None:
    a = make_account(provider, "a")
    recs = [record(a, model_requested="live-model", input_tokens=7, output_tokens=3) for _ in range(2)]

    async def go() -> dict[str, Any]:
        comm = communicator(staff_client)
        assert (await comm.connect())[0]
        assert await comm.receive_json_from() == {"kind": "hello"}
        await database_sync_to_async(write)(recs)
        msg = await comm.receive_json_from(timeout=5)
        await comm.disconnect()
        return msg

    msg = async_to_sync(go)()
    assert msg["kind"] == "requests.logged"
    assert [r["id"] for r in msg["rows"]] == [r.request_id for r in recs]
    assert all("<tr data-request-id=" in r["html"] and "live-model" in r["html"] for r in msg["rows"])
    [acct] = msg["accounts"]
    assert acct["id"] == a.pk and acct["fields"]["requests"] == "2" and acct["fields"]["tokens"] == "14 / 6"


async def next_of_kind(comm: Any, kind: str) -> dict[str, Any]:
    """The next message of ``kind``, past request-log batches that other gateways of this run publish."""

    for _ in range(50):
        message: dict[str, Any] = await comm.receive_json_from(timeout=5)
        if message.get("kind") == kind:
            return message
    raise AssertionError(f"no {kind} message")


def test_disable_and_re_enable_arrive_with_the_event_row(staff_client: Client, provider: Provider) -> None:
    a = make_account(provider, "a")

    async def go() -> list[dict[str, Any]]:
        comm = communicator(staff_client)
        assert (await comm.connect())[0]
        await comm.receive_json_from()
        await database_sync_to_async(pool.disable_account)(
            a.pk, rule="status 429", tier="tier3_account_exhausted", status_code=429,
            excerpt="Rate limit reached for requests")
        disabled = await next_of_kind(comm, "account.disabled")
        await database_sync_to_async(pool.enable_account)(a.pk, "hand")
        enabled = await next_of_kind(comm, "account.enabled")
        await comm.disconnect()
        return [disabled, enabled]

    disabled, enabled = async_to_sync(go)()
    assert disabled["kind"] == "account.disabled"
    assert "tier3_account_exhausted" in disabled["events"][0]["html"] and "Re-enable" in disabled["events"][0]["html"]
    assert disabled["accounts"][0]["fields"]["status"] == "Disabled"
    assert enabled["kind"] == "account.enabled"
    assert enabled["events"][0]["id"] == disabled["events"][0]["id"] and "By hand" in enabled["events"][0]["html"]
    assert enabled["accounts"][0]["fields"]["status"] == "Active"


def test_unknown_event_kinds_are_ignored(staff_client: Client) -> None:
    async def go() -> bool:
        comm = communicator(staff_client)
        assert (await comm.connect())[0]
        await comm.receive_json_from()
        await get_channel_layer().group_send(group(), {"type": "pool.event", "kind": "mystery", "payload": {}})
        kinds = []
        while not await comm.receive_nothing(timeout=0.3):
            kinds.append((await comm.receive_json_from()).get("kind"))
        await comm.disconnect()
        # Request-log batches of this run's other gateways may share the group; "mystery" must not pass.
        return "mystery" not in kinds

    assert async_to_sync(go)() is True


def test_a_cooldown_ended_at_its_time_arrives_with_the_closed_event_and_the_account_active(
        staff_client: Client, provider: Provider) -> None:
    import datetime as dt

    from django.utils import timezone

    a = make_account(provider, "a")
    until = timezone.now() + dt.timedelta(seconds=1)
    pool.disable_account(a.pk, rule="exhausted", tier="tier3_account_exhausted", status_code=429,
                         excerpt="Rate limit reached", cooldown_until=until)

    async def go() -> dict[str, Any]:
        comm = communicator(staff_client)
        assert (await comm.connect())[0]
        await comm.receive_json_from()
        assert await database_sync_to_async(pool.end_due_cooldowns)(until) == [a.pk]  # the leader's round
        enabled = await next_of_kind(comm, "account.enabled")
        await comm.disconnect()
        return enabled

    enabled = async_to_sync(go)()
    [event] = enabled["events"]
    assert "End of cool-down at" in event["html"] and 'class="ended"' in event["html"]
    [account] = enabled["accounts"]
    assert account["id"] == a.pk and account["fields"]["status"] == "Active"
    assert account["fields"]["cooldown_until"] == "—"


def test_the_overview_gets_its_tiles_and_charts_live_for_its_window(staff_client: Client, provider: Provider) -> None:
    a = make_account(provider, "a")
    recs = [record(a) for _ in range(3)] + [record(a, status=500, error_class="upstream_error")]

    async def go() -> dict[str, Any]:
        comm = communicator(staff_client)
        assert (await comm.connect())[0]
        assert await comm.receive_json_from() == {"kind": "hello"}
        await comm.send_json_to({"watch": "overview", "window": "1h"})
        await database_sync_to_async(write)(recs)
        for _ in range(50):
            msg: dict[str, Any] = await comm.receive_json_from(timeout=5)
            if msg.get("kind") == "requests.logged" and msg.get("overview"):
                break
        await comm.disconnect()
        return msg

    html = async_to_sync(go)()["overview"]
    assert '<span class="v" id="t-requests">4</span>' in html and "25.0 %" in html
    assert '<span class="v" id="t-rpm">4</span>' in html
    assert "Requests per 5 minutes, last hour" in html
