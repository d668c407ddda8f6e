"""The API paths' ASGI handler: Django's request and response objects and our async views,
without Django's generic per-request machinery.

Measured under load (bench/, py-spy), Django's ``ASGIHandler`` cost the API more
than routing, translation and the upstream call together: every request opens a
``ThreadSensitiveContext`` whose first sync call starts a new thread (the
``request_started``/``request_finished`` receivers and ``response.close`` run
there), spools the body through a temporary file, resolves the URL through the
resolver and runs two extra tasks. None of that does anything for these paths:
their views are async and keep no per-request resources, and their database
work runs on worker threads through ``accounts.db.hop``, which keeps those
threads' connections healthy as the request signals would. So this handler
reads the body, builds Django's ``ASGIRequest``, calls the view the route table
names for the path, and writes the ``HttpResponse`` or ``StreamingHttpResponse``
itself, with one watcher task that cancels the view (or the stream) when the
client hangs up. CORS (the SOP: every origin; a preflight answered 200 without
auth) is added here, once for every API path.
"""

from __future__ import annotations

import asyncio
import io
import logging
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse

from accounts.db import DatabaseUnavailable

from ..errors import GatewayError, MethodNotAllowed, NotFound, unavailable
from .asgiwrite import NOSNIFF
from .responses import CORS_HEADERS, error_response
from .routes import API_PREFIX

if TYPE_CHECKING:
    from ..app import Gateway

log = logging.getLogger(__name__)

Scope = dict[str, Any]


class ApiHandler:
    def __init__(self, gateway: Gateway) -> None:
        self.gw = gateway

    async def _respond(self, request: HttpRequest) -> HttpResponseBase:
        routes = self.gw.routes
        path = request.path
        if request.method == "OPTIONS" and path.startswith(API_PREFIX):
            return HttpResponse(status=200)
        found = routes.match(path)
        try:
            if found is None:
                raise NotFound(f"Unknown endpoint {path[:200]}")
            if request.method not in found.route.methods:
                allowed = ", ".join(sorted(found.route.methods))
                raise MethodNotAllowed(f"{path} takes {allowed}, not {request.method}", headers={"Allow": allowed})
            return await found.route.view(self.gw, request, **found.params)
        except GatewayError as err:
            return error_response(routes.envelope(path), err)
        except DatabaseUnavailable as exc:
            return error_response(routes.envelope(path), unavailable(exc))

    async def _view(self, request: HttpRequest) -> HttpResponseBase:
        response = await self._respond(request)
        if request.path.startswith(API_PREFIX):
            for name, value in CORS_HEADERS.items():
                response[name] = value
        return response

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
            # The body is in hand, read within the API's own limit (gateway.edge.bodylimit): Django's limit
            # for form data (DATA_UPLOAD_MAX_MEMORY_SIZE) is the pages' and must not refuse it.
            request._body = body
            try:
                response = await self._view(request)
            except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
                raise
            except Exception:
                log.exception("unexpected failure serving %s", scope["path"])
                response = error_response(self.gw.routes.envelope(scope["path"]),
                                          GatewayError("The gateway failed to serve this request"))
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
    if "X-Content-Type-Options" not in response:
        headers.append(NOSNIFF)
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    if isinstance(response, StreamingHttpResponse):  # what .streaming says, in a form the checker reads
        # __aiter__ is an async generator (it has aclose()); the stubs say only AsyncIterator.
        async with aclosing(aiter(response)) as content:  # type: ignore[type-var]
            async for part in content:
                if part:
                    await send({"type": "http.response.body", "body": bytes(part), "more_body": True})
        await send({"type": "http.response.body"})
    else:
        await send({"type": "http.response.body", "body": response.content})  # type: ignore[attr-defined]
