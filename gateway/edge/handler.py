"""The API paths' ASGI handler: one callable from the server's scope to the view's answer.

For each request it matches the route once, refuses it when the gateway is stopping, reads the
body once within the API's size and time limits (decoding a ``Content-Encoding``), builds the
:class:`~gateway.edge.request.ApiRequest`, calls the view the route names, adds CORS (every origin;
a preflight answered 200 without auth) and writes the view's
:class:`~gateway.edge.responses.ApiResponse`. One watcher per request cancels the view (or its
stream) when the client hangs up or the drain gives up on it; an unexpected failure is a 500 in
the path's envelope, never a traceback.

Measured under load (bench/, py-spy): Django's ``ASGIHandler`` had cost the API more than routing,
translation and the upstream call together (a thread-sensitive context whose first sync call
started a thread, the body spooled through a temporary file, the URL resolver, two extra tasks);
then Django's request and response objects built and taken apart again, and four ASGI layers
(drain, body limit, handler, the server's) each wrapping ``receive`` and ``send``. None of it did
anything for these paths: their views are async and keep no per-request resources, and their
database work runs on worker threads through ``accounts.db.hop``, which keeps those threads'
connections healthy as the request signals would.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from accounts.db import DatabaseUnavailable
from translation import registry

from ..errors import GatewayError, MethodNotAllowed, NotFound, unavailable
from .bodylimit import Refused, read_body, refuse
from .request import ApiRequest
from .responses import ApiResponse, error_response
from .routes import API_PREFIX

if TYPE_CHECKING:
    from ..app import Gateway
    from .drain import Drain

log = logging.getLogger(__name__)

Scope = dict[str, Any]
_DROPPED_WHEN_DECODED = (b"content-encoding", b"content-length")


class ApiHandler:
    def __init__(self, gateway: Gateway, drain: Drain) -> None:
        self.gw = gateway
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        gw = self.gw
        path: str = scope["path"]
        routes = gw.routes
        found = routes.match(path)
        if self.drain.stopping and (found is None or not found.route.served_when_stopping):
            return await self.drain.unavailable(path, send)
        envelope = found.route.protocol if found is not None else routes.envelope(path)
        options = gw.options
        length_required = envelope is not None and registry.get(envelope).LENGTH_REQUIRED
        try:
            body = await read_body(scope, receive, options.max_body_bytes, options.body_timeout,
                                   decode=envelope is not None, length_required=length_required)
        except Refused as refusal:
            return await refuse(send, receive, routes, path, refusal)
        if body is None:
            return  # the client left before its request was in
        headers = scope.get("headers", [])
        if envelope is not None and any(name == b"content-encoding" for name, _ in headers):
            headers = [(k, v) for k, v in headers if k not in _DROPPED_WHEN_DECODED]
        request = ApiRequest.from_scope(scope, body, raw_headers=headers)
        cors = path.startswith(API_PREFIX)
        if envelope is None:  # health checks and metrics: nothing to wind down, nobody to watch for
            return await (await self._respond(request, found, envelope)).send_to(send, cors)
        await self._watched(request, found, envelope, receive, send, cors)

    async def _watched(self, request: ApiRequest, found: Any, envelope: str | None, receive: Any, send: Any,
                       cors: bool) -> None:
        """The view and its answer, cancelled when the client hangs up or the drain gives up on it."""

        task = asyncio.current_task()
        assert task is not None
        hung_up = False

        def hang_up(_: Any = None) -> None:
            nonlocal hung_up
            if not hung_up:
                hung_up = True
                task.cancel()

        def watch_done(watch: asyncio.Task[Any]) -> None:
            if not watch.cancelled() and watch.exception() is None:
                hang_up()  # http.disconnect: the only message after the body

        watch = asyncio.ensure_future(receive())
        watch.add_done_callback(watch_done)
        call = self.drain.enter(hang_up)
        try:
            response = await self._respond(request, found, envelope)
            await response.send_to(send, cors)
        except asyncio.CancelledError:
            if not hung_up or task.uncancel() > 0:
                raise  # cancelled from outside (the server is stopping): not ours to swallow
        finally:
            self.drain.leave(call)
            watch.remove_done_callback(watch_done)
            watch.cancel()

    async def _respond(self, request: ApiRequest, found: Any, envelope: str | None) -> ApiResponse:
        if request.method == "OPTIONS" and request.path.startswith(API_PREFIX):
            return ApiResponse(200, content_type=None)
        try:
            if found is None:
                raise NotFound(f"Unknown endpoint {request.path[:200]}")
            if request.method not in found.route.methods:
                allowed = ", ".join(sorted(found.route.methods))
                raise MethodNotAllowed(f"{request.path} takes {allowed}, not {request.method}",
                                       headers={"Allow": allowed})
            response: ApiResponse = await found.route.view(self.gw, request, **found.params)
            return response
        except GatewayError as err:
            return error_response(envelope, err)
        except DatabaseUnavailable as exc:
            return error_response(envelope, unavailable(exc))
        except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
            raise
        except Exception:
            log.exception("unexpected failure serving %s", request.path)
            return error_response(envelope, GatewayError("The gateway failed to serve this request"))
