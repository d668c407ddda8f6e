"""The upstream client's contract with its callers: decoded bodies, pooled or dropped connections, errors."""

from __future__ import annotations

import asyncio
import gzip
import socket
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from gateway.exchange.upstream import NETWORK_ERRORS, UpstreamClient, UpstreamTarget
from gateway.state import ProviderInfo
from translation.ir import UpstreamCaps

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def target(url: str, proxy_url: str = "") -> UpstreamTarget:
    provider = ProviderInfo(id=1, name="up", protocol="openai_chat", base_url=url + "/v1", headers={},
                            served_models=(), selection="lru", connect_timeout=2, first_byte_timeout=2,
                            idle_timeout=2, proxy_url=proxy_url, caps=UpstreamCaps(),
                            anthropic_version="2023-06-01", rules=[])
    return UpstreamTarget(provider, "sk-test", "/chat/completions")


class Upstream:
    """A one-route aiohttp server on this loop that notes each request's client port."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.ports: list[int] = []
        self.dropped = asyncio.Event()

    async def _route(self, request: web.Request) -> web.StreamResponse:
        self.ports.append(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]
        try:
            return await self.handler(request)
        except (ConnectionResetError, asyncio.CancelledError):
            self.dropped.set()
            raise

    async def __aenter__(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._route)
        self.runner = web.AppRunner(app, handler_cancellation=True)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: Any) -> None:
        await self.runner.cleanup()


def run(scenario: Callable[[UpstreamClient], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        client = UpstreamClient()
        try:
            return await scenario(client)
        finally:
            await client.aclose()
    return asyncio.run(main())


async def sse(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"content-type": "text/event-stream"})
    await response.prepare(request)
    for i in range(50):
        await response.write(f"data: {i}\n\n".encode())
        await asyncio.sleep(0.02)
    return response


async def hello(request: web.Request) -> web.Response:
    return web.json_response({"ok": True}, headers={"Retry-After": "30"})


def test_a_fully_read_body_returns_its_connection_to_the_pool() -> None:
    upstream = Upstream(hello)

    async def scenario(client: UpstreamClient) -> None:
        async with upstream as url:
            for _ in range(3):
                response = await client.send(target(url), b"{}")
                assert await response.aread() == b'{"ok": true}'
                await response.aclose()
        assert len(upstream.ports) == 3 and len(set(upstream.ports)) == 1

    run(scenario)


def test_an_abandoned_stream_drops_its_connection_at_once() -> None:
    upstream = Upstream(sse)

    async def scenario(client: UpstreamClient) -> None:
        async with upstream as url:
            response = await client.send(target(url), b"{}")
            first = await anext(response.aiter_raw())
            assert first.startswith(b"data: 0")
            await response.aclose()
            await asyncio.wait_for(upstream.dropped.wait(), timeout=1)
            upstream.handler = hello
            again = await client.send(target(url), b"{}")
            await again.aread()
            await again.aclose()
        assert len(set(upstream.ports)) == 2  # the dropped socket was not reused

    run(scenario)


def test_header_lookup_ignores_case() -> None:
    async def scenario(client: UpstreamClient) -> None:
        async with Upstream(hello) as url:
            response = await client.send(target(url), b"{}")
            await response.aclose()
        assert response.status_code == 200
        assert response.headers.get("retry-after") == "30" and response.headers.get("RETRY-AFTER") == "30"

    run(scenario)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_compressed_stream_reaches_the_reader_decoded(encoding: str) -> None:
    events = b"".join(f"data: {i}\n\n".encode() for i in range(20))

    async def compressed(request: web.Request) -> web.StreamResponse:
        assert "gzip" in request.headers["Accept-Encoding"]
        packer = zlib.compressobj(wbits=31 if encoding == "gzip" else 15)
        response = web.StreamResponse(headers={"content-type": "text/event-stream",
                                               "content-encoding": encoding})
        await response.prepare(request)
        for i in range(0, len(events), 40):
            await response.write(packer.compress(events[i:i + 40]) + packer.flush(zlib.Z_SYNC_FLUSH))
        await response.write(packer.flush())
        return response

    async def scenario(client: UpstreamClient) -> bytes:
        async with Upstream(compressed) as url:
            response = await client.send(target(url), b"{}")
            try:
                return b"".join([chunk async for chunk in response.aiter_raw()])
            finally:
                await response.aclose()

    assert run(scenario) == events


def test_a_compressed_json_body_is_read_decoded() -> None:
    async def compressed(request: web.Request) -> web.Response:
        return web.Response(body=gzip.compress(b'{"ok": true}'),
                            headers={"content-type": "application/json", "content-encoding": "gzip"})

    async def scenario(client: UpstreamClient) -> bytes:
        async with Upstream(compressed) as url:
            response = await client.send(target(url), b"{}")
            try:
                return await response.aread()
            finally:
                await response.aclose()

    assert run(scenario) == b'{"ok": true}'


def test_a_body_cut_short_is_a_network_error() -> None:
    async def cut(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-length": "1000"})
        await response.prepare(request)
        await response.write(b'{"partial": ')
        await asyncio.sleep(0.05)
        request.transport.close()  # type: ignore[union-attr]
        return response

    async def scenario(client: UpstreamClient) -> None:
        async with Upstream(cut) as url:
            response = await client.send(target(url), b"{}")
            with pytest.raises(NETWORK_ERRORS):
                await response.aread()
            await response.aclose()

    run(scenario)


def test_a_refused_connection_is_a_network_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused

        async def scenario(client: UpstreamClient) -> None:
            with pytest.raises(NETWORK_ERRORS):
                await client.send(target(f"http://127.0.0.1:{port}"), b"{}")

        run(scenario)


def test_a_provider_proxy_carries_the_request_with_its_credentials() -> None:
    seen: list[web.Request] = []

    async def proxy(request: web.Request) -> web.Response:
        seen.append(request)
        return web.json_response({"via": "proxy"})

    async def scenario(client: UpstreamClient) -> bytes:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", proxy)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port = runner.addresses[0][1]
        try:
            response = await client.send(target("http://upstream.invalid",
                                                proxy_url=f"http://user:pw@127.0.0.1:{port}"), b"{}")
            try:
                return await response.aread()
            finally:
                await response.aclose()
        finally:
            await runner.cleanup()

    assert run(scenario) == b'{"via": "proxy"}'
    (request,) = seen
    assert str(request.url).endswith("/v1/chat/completions") and request.host == "upstream.invalid"
    assert request.headers["Proxy-Authorization"] == "Basic dXNlcjpwdw=="
