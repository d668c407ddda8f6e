"""A gateway with production's TTLs (configuration 2 s, SQLite pool 1 s, re-read in the background).

A change made through the ORM (the admin, loadconfig, in any process) bumps the configuration's
version and takes effect on the next request (tests/e2e/test_changes_take_effect.py). A write that
bumps nothing (raw SQL, a bulk update) is seen within the TTL and one re-read, and not before the
next re-read is due; meanwhile requests are served from memory.

Each test first locks onto the gateway's re-read schedule: it makes a change only a re-read can
show and watches for it, which bounds when the last re-read happened (after the last request that
did not see it, before the first that did). Its TTL later the next one is due.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from django.db import connection

from accounts import pool as pool_state
from accounts.config_file import load
from accounts.models import Account, ApiKey, ModelAlias, Provider
from tests.e2e.conftest import CLIENT_KEY, pool_config
from tests.servers import Server, received, seen

pytestmark = pytest.mark.django_db(transaction=True)

POLL = 0.05
# A loaded 2-core machine may take this long to notice, re-read and answer, beyond the TTL itself.
SLACK = 1.0

Seen = list[tuple[float, httpx.Response]]


def chat(gateway: Server, model: str, key: str = CLIENT_KEY) -> httpx.Response:
    return httpx.post(gateway.url + "/v1/chat/completions", timeout=10.0, headers={"authorization": f"Bearer {key}"},
                      json={"model": model, "messages": [{"role": "user", "content": "hi"}]})


def watch(send: Callable[[], httpx.Response], until: Callable[[httpx.Response], bool], timeout: float) -> Seen:
    """``send`` every POLL seconds until an answer satisfies ``until`` (kept, last); each with when it was sent."""

    seen_: Seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sent = time.monotonic()
        answer = send()
        seen_.append((sent, answer))
        if until(answer):
            return seen_
        time.sleep(POLL)
    raise AssertionError(f"not seen within {timeout} s: last {seen_[-1][1].status_code} {seen_[-1][1].text[:300]}")


def lock_config(gateway: Server) -> tuple[float, float]:
    """Add an alias and wait until it routes: the configuration was last re-read between the two
    returned times (the sending of the last request that missed it and of the first that found it)."""

    alias = f"phase-{uuid.uuid4().hex[:8]}"
    # bulk_create sends no save signal, so bumps no version: only a re-read shows it.
    ModelAlias.objects.bulk_create([ModelAlias(name=alias, provider=Provider.objects.get(name="up-openai_chat"),
                                               upstream_model="mock-text")])
    got = watch(lambda: chat(gateway, alias), lambda a: a.status_code == 200, 2 * gateway.config_ttl + 5)
    assert all(a.status_code == 404 for _, a in got[:-1]), [a.status_code for _, a in got]
    assert len(got) > 1, "the alias routed at once: the gateway did not cache its configuration"
    return got[-2][0], got[-1][0]


@pytest.fixture
def ready(transactional_db: Any, mock_upstream: Server, production_gateway: Server) -> Server:
    # Session affinity off: these tests watch the pool rotate (the same request, sent again and again,
    # would otherwise stay on its account), and it must be off from the first request.
    load(pool_config(mock_upstream, {"openai_chat": ["sk-ttl-account-aaaa", "sk-ttl-account-bbbb"]}, affinity=False))
    seen(production_gateway)
    return production_gateway


def test_a_new_key_works_on_its_first_request_without_waiting_for_a_re_read(ready: Server) -> None:
    lock_config(ready)
    load({"client_keys": [{"name": "fresh", "key": "gw-fresh-key"}]})
    assert chat(ready, "up-openai_chat/mock-text", "gw-fresh-key").status_code == 200


def test_a_deactivated_key_is_refused_within_the_ttl_and_not_before_the_next_re_read_is_due(ready: Server) -> None:
    lo, hi = lock_config(ready)
    ApiKey.objects.filter(name="e2e").update(active=False)  # from outside: the gateway hears of it by re-reading
    got = watch(lambda: chat(ready, "up-openai_chat/mock-text"), lambda a: a.status_code == 401,
                ready.config_ttl + SLACK + 5)
    refused_at = got[-1][0]
    assert all(a.status_code == 200 for _, a in got[:-1])  # served from the cached configuration meanwhile
    assert refused_at > lo + ready.config_ttl, "refused before the configuration's next re-read was due"
    assert refused_at <= hi + ready.config_ttl + SLACK


def test_a_provider_added_is_routed_and_served_by_the_next_request(ready: Server, mock_upstream: Server) -> None:
    lock_config(ready)
    model = f"late-{uuid.uuid4().hex[:8]}"
    load({"providers": [{"name": "late", "protocol": "openai_chat", "base_url": f"{mock_upstream.url}/v1",
                         "models": [model], "accounts": [{"label": "l0", "api_key": "sk-late-account"}]}]})
    # Routed at once, and served: the pool must not answer a provider it has not read yet with "no accounts".
    answer = chat(ready, model)
    assert answer.status_code == 200, answer.text


def served_by(mock: Server) -> str:
    return str(received(mock)[-1]["key_suffix"])


def test_an_account_disabled_from_outside_stops_being_picked_within_the_pool_ttl(
        ready: Server, mock_upstream: Server) -> None:
    model = "up-openai_chat/mock-text"
    postgres = connection.vendor == "postgresql"  # picked in the database: no pool TTL
    # Lock onto the pool's schedule: a new account, the least recently used of all, is picked by
    # the first request after the pool has re-read.
    load(pool_config(mock_upstream, {"openai_chat": ["sk-ttl-account-aaaa", "sk-ttl-account-bbbb",
                                                      "sk-ttl-account-cccc"]}, affinity=False))
    got = watch(lambda: chat(ready, model), lambda a: served_by(mock_upstream) == "cccc", ready.pool_ttl + SLACK + 5)
    lo, hi = got[-2][0] if len(got) > 1 else 0.0, got[-1][0]
    changed_at = time.monotonic()
    pool_state.disable_by_hand(Account.objects.get(provider__name="up-openai_chat", label="a0").pk)
    picks: list[tuple[float, str]] = []
    while time.monotonic() < changed_at + ready.pool_ttl + SLACK + 1.0:
        sent = time.monotonic()
        assert chat(ready, model).status_code == 200
        picks.append((sent, served_by(mock_upstream)))
        time.sleep(POLL)
    disabled_picked = [sent for sent, who in picks if who == "aaaa"]
    if postgres:
        assert not disabled_picked  # every pick reads the database
        return
    assert len(got) > 1, "the new account was picked at once: the pool did not cache its accounts"
    # Served from the cached pool until its next re-read is due (so still picked), never after that re-read.
    assert disabled_picked, "the disabled account was not picked again before the pool's next re-read"
    assert min(disabled_picked) < lo + ready.pool_ttl
    assert max(disabled_picked) <= hi + ready.pool_ttl + SLACK
    assert {who for sent, who in picks if sent > hi + ready.pool_ttl + SLACK} == {"bbbb", "cccc"}
