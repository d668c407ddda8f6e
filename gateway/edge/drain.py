"""A graceful stop: on SIGTERM open requests end cleanly and every one keeps its log row.

A server's own stop cancels or cuts what is still open: streams end without
their protocol's ending, waiting clients get a dropped connection, and none of
these requests reaches the request log.

So :mod:`gateway.serve` (and :mod:`gateway.edge.daphne` on Daphne) turns SIGTERM (or
SIGINT) into :meth:`Drain.stop` first: new API requests are refused with 503 and ``/readyz`` turns
unavailable; open requests get ``GATEWAY_SHUTDOWN_GRACE`` seconds to finish;
streams still open then are ended in their client's protocol (the upstream read
is aborted with an error, which the stream writer turns into the protocol's
error ending); requests still waiting are told their client is gone, so their
view logs them; the request log is flushed; and only then does the server stop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from .asgiwrite import send_answer, send_error

if TYPE_CHECKING:
    from ..app import Gateway

log = logging.getLogger(__name__)

LAST_WORDS_SECONDS = 2.0  # for aborted streams to write their ending, then for cut requests to log


class Drain:
    """Knows the API requests in flight and can wind them down; the API handler enters each request
    with the callback that hangs it up (its view is cancelled, and logs the request as cut)."""

    def __init__(self, gateway: Gateway) -> None:
        self.gw = gateway
        self.stopping = False
        self.calls: set[Call] = set()

    def enter(self, hang_up: Callable[[], None]) -> Call:
        call = Call(hang_up)
        self.calls.add(call)
        return call

    def leave(self, call: Call) -> None:
        self.calls.discard(call)

    async def stop(self, grace: float) -> None:
        self.stopping = True
        log.info("stopping: %d request(s) open, %.0f s to finish", len(self.calls), grace)
        await self._settle(grace)
        if self.calls:
            self.gw.streams.abort_all("The gateway is shutting down; send the request again")
            await self._settle(LAST_WORDS_SECONDS)
        for call in list(self.calls):
            call.hang_up()
        await self._settle(LAST_WORDS_SECONDS)
        if self.calls:
            log.warning("stopping with %d request(s) still open", len(self.calls))
        await self.gw.aclose()

    async def unavailable(self, path: str, send: Any) -> None:
        headers = [(b"retry-after", b"1"), (b"connection", b"close")]
        if self.gw.routes.envelope(path) is None:  # /readyz: out of the load balancer
            await send_answer(send, 503, orjson.dumps({"status": "stopping"}), "application/json", headers)
        else:
            await send_error(send, self.gw.routes, path, 503,
                             "The gateway is shutting down; send the request to another instance",
                             "overloaded_error", headers)

    async def _settle(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while self.calls and loop.time() < deadline:
            await asyncio.sleep(0.05)


class Call:
    """One API request in flight."""

    __slots__ = ("hang_up",)

    def __init__(self, hang_up: Callable[[], None]) -> None:
        self.hang_up = hang_up
