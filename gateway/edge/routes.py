"""Route tables: path → view, the protocol whose error envelope the path answers in, and the
methods it takes. Every layer of the edge reads the app's one table (``gateway.edge.api``): the router
(is this an API path?), the drain, the body limit, the head limit and the API handler (which view,
which envelope).

A route may also take websockets (``socket``): the edge hands a websocket on its path to that
handler, which serves each message through the same view (``gateway.endpoints.websocket``).

Pages (admin, dashboard, static files, ``/``) are Django's URLconf, not this table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .responses import ApiResponse


View = Callable[..., Awaitable["ApiResponse"]]  # (gateway, request, **path params)
SocketView = Callable[..., Awaitable[None]]  # (gateway, route, scope, receive, send): an ASGI websocket app

API_PREFIX = "/v1/"
DEFAULT_ENVELOPE = "openai_chat"


@dataclass(frozen=True)
class Route:
    # "/v1/messages"; a segment "{name}" matches one path segment, passed as a keyword; a last segment
    # "{name...}" matches the rest of the path, slashes and all (model ids such as "provider/model").
    pattern: str
    view: View
    protocol: str | None  # the error envelope; None: not an LLM protocol path (health checks)
    methods: frozenset[str] = frozenset({"POST"})
    served_when_stopping: bool = False  # a draining gateway still answers it (liveness)
    socket: SocketView | None = None  # serves websockets on the path too

    @property
    def segments(self) -> tuple[str, ...]:
        return tuple(self.pattern.strip("/").split("/"))


@dataclass(frozen=True)
class Match:
    route: Route
    params: dict[str, str]


class RouteTable:
    def __init__(self, routes: Iterable[Route]) -> None:
        self.routes = tuple(routes)
        self._exact = {r.pattern: r for r in self.routes if "{" not in r.pattern}
        self._patterns = [r for r in self.routes if "{" in r.pattern]
        # Envelope of a path no route matches: that of the longest route path it lies under.
        self._families = sorted({(r.pattern.split("{", 1)[0].rstrip("/"), r.protocol) for r in self.routes
                                 if r.protocol is not None}, key=lambda f: -len(f[0]))
        self._other = tuple(p for p in self._exact if not p.startswith(API_PREFIX))

    def is_api(self, path: str) -> bool:
        """Served by the API handler (everything under /v1/ and the table's other paths), not by Django's pages."""

        return path.startswith(API_PREFIX) or path in self._other

    def match(self, path: str) -> Match | None:
        route = self._exact.get(path)
        if route is not None:
            return Match(route, {})
        parts = tuple(path.strip("/").split("/"))
        for route in self._patterns:
            params = _bind(route.segments, parts)
            if params is not None:
                return Match(route, params)
        return None

    def refused_when_stopping(self, path: str) -> bool:
        found = self.match(path)
        return found is None or not found.route.served_when_stopping

    def envelope(self, path: str) -> str | None:
        """The protocol whose error envelope answers ``path``; None for a path that is no LLM protocol's."""

        found = self.match(path)
        if found is not None:
            return found.route.protocol
        if not path.startswith(API_PREFIX):
            return None
        for prefix, protocol in self._families:
            if path == prefix or path.startswith(prefix + "/"):
                return protocol
        return DEFAULT_ENVELOPE


def _bind(segments: tuple[str, ...], parts: tuple[str, ...]) -> dict[str, str] | None:
    """The path parameters when ``parts`` fit the pattern ``segments``, else None."""

    params: dict[str, str] = {}
    last = segments[-1]
    if last.endswith("...}"):  # the rest of the path, one segment or more
        head = len(segments) - 1
        if len(parts) <= head or not all(parts[head:]):
            return None
        params[last[1:-4]] = "/".join(parts[head:])
        segments, parts = segments[:head], parts[:head]
    if len(segments) != len(parts):
        return None
    for want, got in zip(segments, parts):
        if want.startswith("{"):
            if not got:
                return None
            params[want[1:-1]] = got
        elif want != got:
            return None
    return params
