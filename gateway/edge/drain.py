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
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson

from .asgiwrite import send_answer, send_error

if TYPE_CHECKING:
    from ..app import Gateway

log = logging.getLogger(__name__)

Scope = dict[str, Any]
App = Callable[[Scope, Any, Any], Awaitable[None]]  # an ASGI application
LAST_WORDS_SECONDS = 2.0  # for aborted streams to write their ending, then for cut requests to log


class Drain:
    """ASGI wrapper of the API paths that knows the requests in flight and can wind them down."""

    def __init__(self, app: App, gateway: Gateway) -> None:
        self.app = app
        self.gw = gateway
        self.stopping = False
        self.calls: set[asyncio.Future[None]] = set()  # one "hang up" per API request in flight

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        path = scope["path"]
        if self.stopping and self.gw.routes.refused_when_stopping(path):
            return await self._unavailable(path, send)
        if self.gw.routes.envelope(path) is None:  # health checks: nothing to wind down
            return await self.app(scope, receive, send)
        hang_up: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.calls.add(hang_up)
        try:
            await self.app(scope, _until(hang_up, receive), send)
        finally:
            self.calls.discard(hang_up)

    async def stop(self, grace: float) -> None:
        self.stopping = True
        log.info("stopping: %d request(s) open, %.0f s to finish", len(self.calls), grace)
        await self._settle(grace)
        if self.calls:
            self.gw.streams.abort_all("The gateway is shutting down; send the request again")
            await self._settle(LAST_WORDS_SECONDS)
        for hang_up in self.calls:
            if not hang_up.done():
                hang_up.set_result(None)
        await self._settle(LAST_WORDS_SECONDS)
        if self.calls:
            log.warning("stopping with %d request(s) still open", len(self.calls))
        await self.gw.aclose()

    async def _unavailable(self, path: str, send: Any) -> None:
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


def _until(hang_up: asyncio.Future[None], receive: Any) -> Any:
    """``receive``, answering ``http.disconnect`` as soon as ``hang_up`` is done.

    The request body is read straight through (it is there already, or on its way);
    only a wait after it (a view listening for the client to leave) can be cut short.
    """

    body_read = False

    async def guarded_receive() -> dict[str, Any]:
        nonlocal body_read
        if hang_up.done():
            return {"type": "http.disconnect"}
        if not body_read:
            message: dict[str, Any] = await receive()
            body_read = message["type"] != "http.request" or not message.get("more_body", False)
            return message
        waiting = asyncio.ensure_future(receive())

        def cut(_: asyncio.Future[None]) -> None:
            waiting.cancel()

        hang_up.add_done_callback(cut)
        try:
            return await waiting  # type: ignore[no-any-return]
        except asyncio.CancelledError:
            if hang_up.done() and waiting.cancelled() and not _cancelling():
                return {"type": "http.disconnect"}
            raise
        finally:
            hang_up.remove_done_callback(cut)

    return guarded_receive


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0



