"""Answers the edge gives itself, before or instead of a view: written straight to ASGI ``send``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import error_body
from .responses import NOSNIFF
from .routes import RouteTable

Send = Any


async def send_answer(send: Send, status: int, body: bytes, content_type: str,
                      headers: Iterable[tuple[bytes, bytes]] = (), more_body: bool = False) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type.encode()),
                            (b"content-length", str(len(body)).encode()), NOSNIFF, *headers]})
    await send({"type": "http.response.body", "body": body, "more_body": more_body})


async def send_error(send: Send, routes: RouteTable, path: str, status: int, message: str, error_type: str,
                     headers: Iterable[tuple[bytes, bytes]] = (), more_body: bool = False) -> None:
    """An error in the envelope ``routes`` gives ``path`` (plain text off the API)."""

    body, content_type = error_body(routes.envelope(path), status, message, error_type)
    await send_answer(send, status, body, content_type, headers, more_body)
