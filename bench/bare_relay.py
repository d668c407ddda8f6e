"""The bare relay: the ceiling for our stack.

A minimal ASGI app, no Django: the request body is forwarded to the upstream
(``BENCH_UPSTREAM``, same path) with aiohttp, the fastest client we measured,
and the response is streamed back chunk by chunk. No auth, no parsing, no
translation, no database: whatever the gateway spends beyond this is its own.
The bench's baseline runs it on Daphne, as issue 6 defines it:

    BENCH_UPSTREAM=http://127.0.0.1:9300 daphne -p 9400 bench.bare_relay:app

and its ``servers`` section also on the gateway's own server and settings (``gateway.serve``):

    BENCH_UPSTREAM=http://127.0.0.1:9300 python -m bench.bare_relay --port 9400
"""

from __future__ import annotations

import os
from typing import Any

import aiohttp

UPSTREAM = os.environ.get("BENCH_UPSTREAM", "http://127.0.0.1:9300").rstrip("/")
FORWARDED = {b"authorization", b"x-api-key", b"anthropic-version", b"content-type"}
_session: aiohttp.ClientSession | None = None


def _client() -> aiohttp.ClientSession:
    # Created on first use, on the server's running loop (the servers send it no lifespan events).
    global _session
    if _session is None:
        connector = aiohttp.TCPConnector(limit=4096, keepalive_timeout=30)
        _session = aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                         timeout=aiohttp.ClientTimeout(total=None))
    return _session


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    headers = {k.decode(): v.decode() for k, v in scope["headers"] if k in FORWARDED}
    async with _client().post(UPSTREAM + scope["path"], data=b"".join(chunks), headers=headers) as resp:
        out = [(b"content-type", resp.headers.get("content-type", "application/octet-stream").encode())]
        length = resp.headers.get("content-length")
        if length is not None:
            out.append((b"content-length", length.encode()))
        await send({"type": "http.response.start", "status": resp.status, "headers": out})
        async for chunk in resp.content.iter_any():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


if __name__ == "__main__":
    import argparse

    import uvicorn

    from gateway.serve import config

    parser = argparse.ArgumentParser(prog="python -m bench.bare_relay")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9400)
    args = parser.parse_args()
    uvicorn.Server(config(app, args.host, args.port, log_level="warning")).run()
