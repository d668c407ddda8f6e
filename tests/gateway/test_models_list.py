"""/v1/models: providers' own lists cached for 5 minutes, merged with the configured names."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from aiohttp import web

from gateway.endpoints.models_list import ModelCatalog
from gateway.exchange.upstream import UpstreamClient
from gateway.state import AliasInfo, ProviderInfo, Snapshot
from mockupstream.server import ServerThread
from translation.ir import UpstreamCaps


class Upstream:
    """The scripted upstream, counting GETs of /v1/models and able to fail them."""

    def __init__(self) -> None:
        self.server = ServerThread()
        self.fetches = 0
        self.failing = False

        @web.middleware
        async def count(request: web.Request, handler: Callable[[web.Request], Awaitable[Any]]) -> Any:
            if request.path == "/v1/models":
                self.fetches += 1
                await asyncio.sleep(0.05)  # long enough for concurrent callers to pile up
                if self.failing:
                    return web.json_response({"error": {"message": "boom"}}, status=500)
            return await handler(request)

        self.server.app.middlewares.append(count)


@pytest.fixture
def mock() -> Iterator[Upstream]:
    up = Upstream()
    up.server.start()
    yield up
    up.server.stop()


@pytest.fixture
def clock() -> list[float]:
    return [1000.0]


@pytest.fixture
def client() -> UpstreamClient:
    return UpstreamClient()


@pytest.fixture
def models_list(client: UpstreamClient, clock: list[float]) -> ModelCatalog:
    """A catalog whose clock the test moves, reading any provider's list with a fixed key."""

    return ModelCatalog(client, ttl=300.0, clock=lambda: clock[0], secret_of=lambda provider_id: "sk-models-list-key")


def provider(url: str, pid: int = 1, name: str = "up", served: tuple[str, ...] = ()) -> ProviderInfo:
    return ProviderInfo(id=pid, name=name, protocol="openai_chat", base_url=url + "/v1", headers={},
                        served_models=served, selection="lru", connect_timeout=2, first_byte_timeout=2,
                        idle_timeout=2, proxy_url="", caps=UpstreamCaps(), anthropic_version="2023-06-01",
                        rules=[])


def run(coro: Awaitable[Any], client: UpstreamClient) -> Any:
    async def main() -> Any:
        try:
            return await coro
        finally:
            await client.aclose()
    return asyncio.run(main())


def test_a_providers_list_is_fetched_once_per_five_minutes(mock: Upstream, clock: list[float], models_list: ModelCatalog,
        client: UpstreamClient) -> None:
    p = provider(mock.server.url)

    async def scenario() -> list[list[str]]:
        seen = [await models_list.upstream_models(p)]
        clock[0] += 299
        seen.append(await models_list.upstream_models(p))
        assert mock.fetches == 1
        clock[0] += 2
        seen.append(await models_list.upstream_models(p))
        return seen

    first, cached, refetched = run(scenario(), client)
    assert mock.fetches == 2
    assert "mock-text" in first and first == cached == refetched


def test_concurrent_callers_of_a_cold_cache_share_one_fetch(mock: Upstream, clock: list[float], models_list: ModelCatalog,
        client: UpstreamClient) -> None:
    p = provider(mock.server.url)

    async def scenario() -> list[list[str]]:
        return await asyncio.gather(*(models_list.upstream_models(p) for _ in range(10)))

    results = run(scenario(), client)
    assert mock.fetches == 1 and all(r == results[0] for r in results)


def test_a_failed_fetch_is_retried_after_thirty_seconds_not_five_minutes(mock: Upstream, clock: list[float], models_list: ModelCatalog,
        client: UpstreamClient) -> None:
    p = provider(mock.server.url)
    mock.failing = True

    async def scenario() -> tuple[list[str], list[str], list[str]]:
        failed = await models_list.upstream_models(p)
        clock[0] += 10
        still_cached = await models_list.upstream_models(p)
        mock.failing = False
        clock[0] += 21
        return failed, still_cached, await models_list.upstream_models(p)

    failed, still_cached, recovered = run(scenario(), client)
    assert failed == still_cached == [] and "mock-text" in recovered
    assert mock.fetches == 2


def test_a_repointed_provider_is_fetched_afresh(mock: Upstream, clock: list[float], models_list: ModelCatalog,
        client: UpstreamClient) -> None:
    async def scenario() -> None:
        await models_list.upstream_models(provider(mock.server.url))
        await models_list.upstream_models(provider(mock.server.url.replace("127.0.0.1", "localhost")))

    run(scenario(), client)
    assert mock.fetches == 2


def test_the_list_has_each_routed_name_once_under_the_provider_it_routes_to(
        mock: Upstream, clock: list[float], models_list: ModelCatalog, client: UpstreamClient) -> None:
    a = provider(mock.server.url, 1, "a", served=("mock-text", "house-model"))
    b = provider("http://127.0.0.1:9", 2, "b", served=("house-model",))  # nothing listens: only its configured names
    snap = Snapshot(providers={1: a, 2: b}, aliases=[
        AliasInfo("fast", False, 2, "mock-text", 0, {"display_name": "Fast"}), AliasInfo("claude-*", True, 1, "*", 0),
        AliasInfo("mock-text", False, 2, "*", 0)])
    entries = run(models_list.entries(snap), client)
    ids = [e.id for e in entries]
    assert ids == sorted(set(ids)) and not any("*" in i for i in ids)
    owners = {e.id: e.owner for e in entries}
    # the exact alias takes mock-text to b, though a serves it too; house-model goes to the first server
    assert owners["fast"] == "b" and owners["mock-text"] == "b" and owners["house-model"] == "a"
    # an upstream's own name that routes nowhere as it is is listed as the provider route that reaches it
    assert "mock-tool" not in ids and owners["a/mock-tool"] == "a"
    assert {e.id: e.metadata for e in entries}["fast"] == {"display_name": "Fast"}


def test_the_key_filter_sees_the_listed_id(mock: Upstream, clock: list[float], models_list: ModelCatalog,
        client: UpstreamClient) -> None:
    snap = Snapshot(providers={1: provider(mock.server.url, 1, "a", served=("mock-text",))})
    entries = run(models_list.entries(snap, lambda model: "/" not in model), client)
    assert [e.id for e in entries] == ["mock-text"]
