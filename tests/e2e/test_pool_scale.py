"""The pool shared by two gateway processes on PostgreSQL, under 200 concurrent requests.

Selection must be atomic across processes (``FOR UPDATE SKIP LOCKED``): LRU then
spreads requests evenly, a failing account is disabled exactly once however
many requests see it fail, and usage counters and balances add up exactly.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.db import connection
from django.db.models import Sum

from accounts.config_file import load
from accounts.models import Account, DisableEvent, RequestLog
from tests.servers import Server, database_url, gateway_processes, seen

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("postgresql" not in settings.DATABASES["default"]["ENGINE"],
                       reason="needs DATABASE_URL=postgres://… (two gateway processes share one database)"),
]

REQUESTS = 200
CONCURRENCY = 50
ACCOUNTS = 5
CLIENT_KEY = "gw-scale-key"
PRICES = {"mock-text": {"input": 1, "output": 2, "cached": 0.5}}  # exact at the balance's 8 decimals
START_BALANCE = Decimal(100)


@pytest.fixture(scope="module")
def gateways(django_db_setup: Any, django_db_blocker: Any, mock_upstream: Server) -> Iterator[list[Server]]:
    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    with gateway_processes(url, 2, {"LOG_LEVEL": "WARNING"}) as servers:
        yield servers


def load_pool(gateways: list[Server], mock: Server, keys: list[str]) -> None:
    load({"providers": [{"name": "scale", "protocol": "openai_chat", "base_url": f"{mock.url}/v1", "models": [],
                         "prices": PRICES,
                         "accounts": [{"label": f"s{i}", "api_key": k, "balance": str(START_BALANCE)}
                                      for i, k in enumerate(keys)]}],
          "client_keys": [{"name": "scale", "key": CLIENT_KEY}]})
    seen(*gateways)
    httpx.post(mock.url + "/_mock/reset")


async def one_request(client: httpx.AsyncClient, base: str, n: int) -> tuple[int, dict[str, int]]:
    """A chat completion, streamed for odd n; returns the status and the usage the client was told."""

    stream = n % 2 == 1
    body: dict[str, Any] = {"model": "scale/mock-text", "messages": [{"role": "user", "content": f"request {n}"}],
                            "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    headers = {"authorization": f"Bearer {CLIENT_KEY}"}
    if not stream:
        resp = await client.post(base + "/v1/chat/completions", json=body, headers=headers)
        return resp.status_code, resp.json().get("usage", {}) if resp.status_code == 200 else {}
    usage: dict[str, int] = {}
    async with client.stream("POST", base + "/v1/chat/completions", json=body, headers=headers) as resp:
        done = False
        async for line in resp.aiter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                chunk = json.loads(line[6:])
                if chunk.get("error"):
                    return 599, {}  # an error ending after the commit counts as a failed request
                usage = chunk.get("usage") or usage
        return (resp.status_code if done else 598), usage


def run_load(gateways: list[Server]) -> tuple[list[tuple[int, dict[str, int]]], float]:
    async def main() -> list[tuple[int, dict[str, int]]]:
        gate = asyncio.Semaphore(CONCURRENCY)
        limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
        async with httpx.AsyncClient(timeout=30, limits=limits) as client:
            async def bounded(n: int) -> tuple[int, dict[str, int]]:
                async with gate:
                    return await one_request(client, gateways[n % len(gateways)].url, n)
            return await asyncio.gather(*(bounded(n) for n in range(REQUESTS)))

    t0 = time.monotonic()
    results = asyncio.run(main())
    return results, time.monotonic() - t0


def wait_for_log(expected: int, timeout: float = 30.0) -> None:
    """Both processes' log writers have written every row (and the counters in the same transaction)."""

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if RequestLog.objects.filter(provider__name="scale").count() >= expected:
            return
        time.sleep(0.1)
    raise AssertionError(f"only {RequestLog.objects.count()} of {expected} request-log rows were written")


def usage_totals(results: list[tuple[int, dict[str, int]]]) -> tuple[int, int]:
    return (sum(u.get("prompt_tokens", 0) for _, u in results),
            sum(u.get("completion_tokens", 0) for _, u in results))


def test_200_concurrent_requests_over_two_processes_spread_evenly_and_add_up(
        gateways: list[Server], mock_upstream: Server) -> None:
    load_pool(gateways, mock_upstream, [f"sk-scale-good-{i}" for i in range(ACCOUNTS)])
    results, elapsed = run_load(gateways)
    print(f"\n{REQUESTS} requests over 2 gateway processes at concurrency {CONCURRENCY}: "
          f"{elapsed:.2f}s ({REQUESTS / elapsed:.0f} req/s)")
    assert Counter(status for status, _ in results) == {200: REQUESTS}
    wait_for_log(REQUESTS)

    per_account = Counter(RequestLog.objects.filter(provider__name="scale").values_list("account__label", flat=True))
    print(f"requests per account: {dict(sorted(per_account.items()))}")
    fair = REQUESTS // ACCOUNTS
    assert len(per_account) == ACCOUNTS and all(abs(n - fair) <= 2 for n in per_account.values()), per_account
    assert set(RequestLog.objects.filter(provider__name="scale").values_list("attempt_count", flat=True)) == {1}

    prompt, completion = usage_totals(results)
    assert prompt > 0 and completion > 0
    totals = Account.objects.filter(provider__name="scale").aggregate(
        requests=Sum("requests"), errors=Sum("errors"), inp=Sum("input_tokens"), out=Sum("output_tokens"),
        balance=Sum("balance"))
    assert (totals["requests"], totals["errors"], totals["inp"], totals["out"]) == (REQUESTS, 0, prompt, completion)
    expected_cost = (Decimal(prompt) * 1 + Decimal(completion) * 2) / 1_000_000
    assert totals["balance"] == ACCOUNTS * START_BALANCE - expected_cost
    assert not DisableEvent.objects.exists()


def test_an_account_answering_429_is_disabled_exactly_once_and_no_request_fails(
        gateways: list[Server], mock_upstream: Server) -> None:
    keys = [f"sk-scale-good-{i}" for i in range(ACCOUNTS - 1)] + ["sk-scale-fail-429-x"]
    load_pool(gateways, mock_upstream, keys)
    results, elapsed = run_load(gateways)
    assert Counter(status for status, _ in results) == {200: REQUESTS}
    wait_for_log(REQUESTS)

    bad = Account.objects.get(provider__name="scale", label=f"s{ACCOUNTS - 1}")
    events = list(DisableEvent.objects.all())
    assert [(e.account_id, e.status_code, e.tier) for e in events] == [(bad.pk, 429, "tier3_account_exhausted")]
    assert bad.status == Account.COOLING and bad.cooldown_until is not None  # Retry-After honoured
    rows = RequestLog.objects.filter(provider__name="scale")
    assert not rows.filter(account=bad).exists()  # it served nothing
    retried = [r.attempts for r in rows.filter(attempt_count__gt=1)]
    assert retried and all(a[0]["status"] == 429 and a[-1]["verdict"] == "ok" for a in retried)
    prompt, completion = usage_totals(results)
    totals = Account.objects.filter(provider__name="scale").aggregate(inp=Sum("input_tokens"),
                                                                      out=Sum("output_tokens"))
    assert (totals["inp"], totals["out"]) == (prompt, completion)
    print(f"\nwith one 429 account: {elapsed:.2f}s, {len(retried)} request(s) retried past it")
