"""Scripted answers given whole: a test hands the scripted upstream the exact bytes to answer a model with.

``POST /_mock/replay`` ``{"model": "...", "status": 200, "content_type": "text/event-stream",
"body": "<the answer, as text>", "headers": {...}}`` — from then on, every request for that
model gets exactly that answer (a recorded provider stream, a provider's error body), until
``/_mock/reset``. This is how tests prove that what the gateway passes through arrives
unchanged: the bytes are known, and were never produced by our own encoders.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

CHUNK = 512  # written in pieces, as a network would deliver a long answer


@dataclass(frozen=True)
class Replay:
    status: int
    content_type: str
    body: bytes
    headers: dict[str, str]


def parse(spec: Any) -> tuple[str, Replay]:
    if not isinstance(spec, dict) or not isinstance(spec.get("model"), str) or not isinstance(spec.get("body"), str):
        raise web.HTTPBadRequest(text="replay needs model and body (strings)")
    return spec["model"], Replay(status=int(spec.get("status", 200)),
                                 content_type=str(spec.get("content_type", "application/json")),
                                 body=spec["body"].encode(), headers=dict(spec.get("headers") or {}))


async def answer(request: web.Request, replay: Replay) -> web.StreamResponse:
    resp = web.StreamResponse(status=replay.status, headers={"Content-Type": replay.content_type, **replay.headers})
    await resp.prepare(request)
    for start in range(0, len(replay.body), CHUNK):
        await resp.write(replay.body[start:start + CHUNK])
    await resp.write_eof()
    return resp
