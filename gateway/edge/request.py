"""The API paths' request: what an ASGI scope and its body say, and nothing built that a view does
not read.

Django's ``ASGIRequest`` turned every header into a ``META`` entry, parsed the query string and
wrapped the body in a stream on every call, for views that read two headers and the body. This
one keeps the server's raw header list and builds the lower-cased map only when a view asks for
more than a header or two (forwarding does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

RawHeaders = list[tuple[bytes, bytes]]


class ApiRequest:
    __slots__ = ("method", "path", "query", "raw_headers", "body", "transport", "client", "scheme", "parsed",
                 "_headers", "_params")

    def __init__(self, method: str, path: str, query: str = "", raw_headers: RawHeaders | None = None,
                 body: bytes = b"", transport: str = "http", client: tuple[str, int] | None = None,
                 scheme: str = "http", parsed: dict[str, Any] | None = None) -> None:
        self.method = method
        self.path = path
        self.query = query  # the raw query string, without "?"
        self.raw_headers = raw_headers if raw_headers is not None else []
        self.body = body
        self.transport = transport  # "http", or "websocket" for a turn of a Responses socket
        self.client = client  # (host, port) of the peer, as the server saw it
        self.scheme = scheme  # "http" or "https" as the server saw it (a TLS proxy in front: see the settings)
        # ``body`` already read as a JSON object by the transport that carried it (a websocket turn,
        # assembled from its message): the view takes it as it is rather than reading the bytes again.
        self.parsed = parsed
        self._headers: dict[str, str] | None = None
        self._params: dict[str, str] | None = None

    @classmethod
    def from_scope(cls, scope: Mapping[str, Any], body: bytes, transport: str = "http",
                   raw_headers: RawHeaders | None = None) -> ApiRequest:
        query = scope.get("query_string", b"")
        return cls(scope.get("method", "GET"), scope["path"], query.decode("latin-1") if query else "",
                   list(scope.get("headers", ())) if raw_headers is None else raw_headers, body, transport,
                   scope.get("client"), "https" if scope.get("scheme") in ("https", "wss") else "http")

    @property
    def headers(self) -> Mapping[str, str]:
        """Every header by its lower-cased name; repeated headers joined with ", " as HTTP allows."""

        if self._headers is None:
            headers: dict[str, str] = {}
            for name, value in self.raw_headers:
                key, text = name.decode("latin-1").lower(), value.decode("latin-1")
                headers[key] = f"{headers[key]}, {text}" if key in headers else text
            self._headers = headers
        return self._headers

    def header(self, name: str) -> str:
        """One header by its lower-cased ``name`` ("" when absent), without building the whole map."""

        if self._headers is not None:
            return self._headers.get(name, "")
        wanted = name.encode("latin-1")
        found = [value.decode("latin-1") for key, value in self.raw_headers if key.lower() == wanted]
        return ", ".join(found)

    def param_lists(self) -> dict[str, list[str]]:
        """Every query parameter with all its values, in order."""

        out: dict[str, list[str]] = {}
        for name, value in parse_qsl(self.query, keep_blank_values=True):
            out.setdefault(name, []).append(value)
        return out

    @property
    def params(self) -> Mapping[str, str]:
        """The query string's parameters (the last value of a repeated one)."""

        if self._params is None:
            self._params = dict(parse_qsl(self.query, keep_blank_values=True))
        return self._params
