"""The gateway's edge: the one ASGI application the server runs.

Websockets on an API path go to the route's websocket handler (the route
table's ``socket``; refused where it has none), others to the dashboard's
consumers; HTTP goes to the API handler (``gateway.edge.handler``: the drain, the body limit, the route,
the view, in one frame) when the route table (``gateway.edge.routes``) says the path is the
API's, else to Django's full stack (admin, dashboard, static files) behind the pages' body limit.
Every layer reads the one route table and answers errors through one renderer
(``gateway.errors.error_body``).

One frame where channels' ProtocolTypeRouter and a path split were two: every
resumption of a request's innermost await passes through each frame of the chain.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .bodylimit import BodyLimit
from .drain import Drain
from .handler import ApiHandler

if TYPE_CHECKING:
    from ..app import Gateway

Scope = dict[str, Any]


class Edge:
    def __init__(self, gateway: Gateway, pages: Any, sockets: Any) -> None:
        self.gw = gateway
        options = gateway.options
        self.drain = Drain(gateway)
        self.api = ApiHandler(gateway, self.drain)
        self.pages = BodyLimit(pages, gateway.routes, options.max_page_body_bytes, options.body_timeout)
        self.sockets = sockets

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        self.gw.start()  # once, on the server's loop: the background work
        kind = scope["type"]
        if kind == "http":
            app = self.api if self.gw.routes.is_api(scope["path"]) else self.pages
        elif kind == "websocket":
            if self.gw.routes.is_api(scope["path"]):
                return await self._api_socket(scope, receive, send)
            app = self.sockets
        elif kind == "lifespan":
            return await _lifespan(receive, send)
        else:
            raise ValueError(f"No application configured for scope type {kind!r}")
        await app(scope, receive, send)

    async def _api_socket(self, scope: Scope, receive: Any, send: Any) -> None:
        found = self.gw.routes.match(scope["path"])
        if found is None or found.route.socket is None or self.drain.stopping:
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 4503 if self.drain.stopping else 4404})  # HTTP 403 to the client
            return
        await found.route.socket(self.gw, found.route, scope, receive, send, **found.params)


async def _lifespan(receive: Any, send: Any) -> None:
    """A server that sends lifespan events (uvicorn with ``--lifespan on``) is answered; nothing to do."""

    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
