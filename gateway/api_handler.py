"""The API paths' ASGI handler: Django's request and response objects and our async views,
without Django's generic per-request machinery.

Measured under load (bench/, py-spy), Django's ``ASGIHandler`` cost the API more
than routing, translation and the upstream call together: every request opens a
``ThreadSensitiveContext`` whose first sync call starts a new thread (the
``request_started``/``request_finished`` receivers and ``response.close`` run
there), spools the body through a temporary file, resolves the URL through the
resolver and runs two extra tasks. None of that does anything for these paths:
their views are async, touch the database only through worker threads of their
own, and keep no per-request resources. So this handler reads the body, builds
Django's ``ASGIRequest``, calls the view the URLconf names for the path, and
writes the ``HttpResponse`` or ``StreamingHttpResponse`` itself, with one
watcher task that cancels the view (or the stream) when the client hangs up.
Everything else (admin, dashboard, static) keeps Django's full stack.
"""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponseBase
from django.urls import URLPattern, get_resolver

from .bodylimit import error_body
from .middleware import CorsMiddleware
from .responses import raw_json_response

log = logging.getLogger(__name__)

API_PREFIXES = ("/v1/", "/healthz", "/readyz")
Scope = dict[str, Any]
View = Callable[[HttpRequest], Awaitable[HttpResponseBase]]


def api_routes() -> dict[str, View]:
    """The URLconf's plain API paths (``/v1/...``, health checks), path → view: one routing table."""

    routes: dict[str, View] = {}
    for pattern in get_resolver().url_patterns:
        if isinstance(pattern, URLPattern):
            path = "/" + str(pattern.pattern)
            if path.startswith(API_PREFIXES):
                # csrf_exempt's wrapper only speaks to the CSRF middleware, which this handler never runs.
                routes[path] = getattr(pattern.callback, "__wrapped__", pattern.callback)
    return routes


class ApiHandler:
    def __init__(self) -> None:
        self._routes: dict[str, View] | None = None
        self._handler = CorsMiddleware(self._view)

    async def _view(self, request: HttpRequest) -> HttpResponseBase:
        if self._routes is None:
            self._routes = api_routes()
        view = self._routes.get(request.path)
        if view is None:
            return _error(request.path, 404, f"Unknown endpoint {request.path[:200]}", "not_found_error")
        return await view(request)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        body = await _read_body(receive)
        if body is None:
            return  # the client left before its request was in
        task = asyncio.current_task()
        assert task is not None
        hung_up = False

        def watch_done(watch: asyncio.Task[Any]) -> None:
            nonlocal hung_up
            if not watch.cancelled() and watch.exception() is None and not hung_up:
                hung_up = True  # http.disconnect: the only message after the body
                task.cancel()

        watch = asyncio.ensure_future(receive())
        watch.add_done_callback(watch_done)
        try:
            request = ASGIRequest(scope, io.BytesIO(body))
            try:
                response = await self._handler(request)
            except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
                raise
            except Exception:
                log.exception("unexpected failure serving %s", scope["path"])
                response = _error(scope["path"], 500, "The gateway failed to serve this request", "api_error")
            await _send_response(response, send)
        except asyncio.CancelledError:
            if not hung_up or task.uncancel() > 0:
                raise  # cancelled from outside (the server is stopping): not ours to swallow
        finally:
            watch.remove_done_callback(watch_done)
            watch.cancel()


async def _read_body(receive: Any) -> bytes | None:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _send_response(response: HttpResponseBase, send: Any) -> None:
    headers = [(name.encode("ascii"), value.encode("latin1")) for name, value in response.items()]
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    if response.streaming:
        async with aclosing(aiter(response)) as content:  # type: ignore[type-var]
            async for part in content:
                if part:
                    await send({"type": "http.response.body", "body": bytes(part), "more_body": True})
        await send({"type": "http.response.body"})
    else:
        await send({"type": "http.response.body", "body": response.content})  # type: ignore[attr-defined]


def _error(path: str, status: int, message: str, error_type: str) -> HttpResponseBase:
    return raw_json_response(error_body(path, status, message, error_type), status)


class Router:
    """The ASGI entry point: API paths to ``api``, other HTTP to ``pages``, websockets to ``sockets``.

    One frame where channels' ProtocolTypeRouter and a path split were two: every
    resumption of a request's innermost await passes through each frame of the chain.
    """

    def __init__(self, api: Any, pages: Any, sockets: Any) -> None:
        self.api = api
        self.pages = pages
        self.sockets = sockets

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind == "http":
            app = self.api if scope["path"].startswith(API_PREFIXES) else self.pages
        elif kind == "websocket":
            app = self.sockets
        else:
            raise ValueError(f"No application configured for scope type {kind!r}")
        await app(scope, receive, send)
