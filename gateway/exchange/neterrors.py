"""Upstream network failures told two ways: a kind for the client, the details for ops.

aiohttp's exception texts name what was being reached ("Cannot connect to host
10.1.2.3:8443 ssl:default [Connection refused]", a proxy's address, the URL of a
failed ``/models`` fetch). That is the deployment's inside: a client is told only
what kind of failure it was (``"connection refused"``), which is all it can act
on; the attempt trace in the request log, which only staff see, keeps the text,
with anything secret-shaped removed (a proxy URL's password, a key in a query).
"""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
from enum import StrEnum

import aiohttp

from accounts.redact import redact

TRACE_LIMIT = 300


class NetworkFailure(StrEnum):
    """What kind of failure a client is told of; the value is its wording."""

    REFUSED = "connection refused"
    TIMEOUT = "timed out"
    TLS = "TLS error"
    DNS = "host name not resolved"
    PROXY = "proxy error"
    LOST = "connection lost"
    ADDRESS = "invalid upstream address"
    OTHER = "network error"


# Checked in order: the specific aiohttp classes derive from the general ones (an SSL error and a
# proxy failure are connector errors, a connect timeout is a server timeout).
_KINDS: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], NetworkFailure], ...] = (
    ((aiohttp.ClientSSLError, ssl.SSLError), NetworkFailure.TLS),
    ((aiohttp.ClientProxyConnectionError, aiohttp.ClientHttpProxyError), NetworkFailure.PROXY),
    ((aiohttp.ClientConnectorDNSError, socket.gaierror), NetworkFailure.DNS),
    ((asyncio.TimeoutError, aiohttp.ServerTimeoutError), NetworkFailure.TIMEOUT),
    (ConnectionRefusedError, NetworkFailure.REFUSED),
    (aiohttp.InvalidURL, NetworkFailure.ADDRESS),
    ((aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, ConnectionResetError,
      ConnectionAbortedError, BrokenPipeError), NetworkFailure.LOST),
)

_ERRNOS = {errno.ECONNREFUSED: NetworkFailure.REFUSED, errno.ETIMEDOUT: NetworkFailure.TIMEOUT,
           errno.ECONNRESET: NetworkFailure.LOST, errno.EPIPE: NetworkFailure.LOST}


def failure_kind(exc: BaseException) -> NetworkFailure:
    for classes, kind in _KINDS:
        if isinstance(exc, classes):
            return kind
    if isinstance(exc, aiohttp.ClientConnectorError):
        # The OS error underneath says what happened to the connect (refused, reset, unreachable).
        return failure_kind(exc.os_error)
    if isinstance(exc, OSError):
        # A bare OSError (several addresses tried, each failing) still may carry the errno.
        return _ERRNOS.get(exc.errno or 0, NetworkFailure.OTHER)
    return NetworkFailure.OTHER


def client_message(kind: NetworkFailure) -> str:
    """What a client is told when no account's upstream could be reached."""

    return f"The upstream could not be reached ({kind})"


def trace_text(exc: BaseException, secrets: list[str] | None = None) -> str:
    """The failure as the attempt trace keeps it: the kind, then aiohttp's own words, redacted."""

    kind = failure_kind(exc)
    if isinstance(exc, asyncio.TimeoutError) and not str(exc):
        return f"{kind}: waiting for the upstream"
    return redact(f"{kind}: {type(exc).__name__}: {exc}", secrets or (), limit=TRACE_LIMIT)
