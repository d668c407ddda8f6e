"""A graceful stop under Daphne: on SIGTERM open requests end cleanly and every one keeps its log row.

Daphne's own SIGTERM handling cancels every application at once. Django's ASGI
handler leaves the view running in a task of its own, which then dies with the
event loop: streams are cut off without their protocol's ending, waiting
clients get a dropped connection, and none of these requests reaches the
request log (and the interpreter could crash on the way out with the log
writer still busy).

So SIGTERM (or SIGINT) starts a drain instead: new API requests are refused
with 503 and ``/readyz`` turns unavailable; open requests get
``GATEWAY_SHUTDOWN_GRACE`` seconds to finish; streams still open then are ended
in their client's protocol (the upstream read is aborted with an error, which
the stream writer turns into the protocol's error ending); requests still
waiting are told their client is gone, so their view logs them; the request
log is flushed; and only then is Daphne stopped. A second signal stops at once.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import threading
from typing import Any

import orjson
from django.conf import settings

from . import relay, reqlog
from .bodylimit import error_body
from .upstream import upstream

log = logging.getLogger(__name__)

Scope = dict[str, Any]
LAST_WORDS_SECONDS = 2.0  # for aborted streams to write their ending, then for cut requests to log


class Drain:
    """ASGI wrapper that knows the API requests in flight and can wind them down."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.stopping = False
        self.calls: set[asyncio.Event] = set()  # one "hang up" event per API request in flight

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        if self.stopping and (path.startswith("/v1/") or path == "/readyz"):
            return await _unavailable(path, send)
        if not path.startswith("/v1/"):
            return await self.app(scope, receive, send)
        hang_up = asyncio.Event()
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
            for stream in list(relay.OPEN):
                stream.abort("The gateway is shutting down; send the request again")
            await self._settle(LAST_WORDS_SECONDS)
        for hang_up in self.calls:
            hang_up.set()
        await self._settle(LAST_WORDS_SECONDS)
        if self.calls:
            log.warning("stopping with %d request(s) still open", len(self.calls))
        try:
            await asyncio.to_thread(reqlog.writer.flush)
        except Exception:  # noqa: BLE001 - the exit-time flush will try again
            log.exception("request log flush failed while stopping")
        await upstream.aclose()

    async def _settle(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while self.calls and loop.time() < deadline:
            await asyncio.sleep(0.05)


def _until(hang_up: asyncio.Event, receive: Any) -> Any:
    """``receive``, answering ``http.disconnect`` as soon as ``hang_up`` is set."""

    async def guarded_receive() -> dict[str, Any]:
        if hang_up.is_set():
            return {"type": "http.disconnect"}
        message = asyncio.ensure_future(receive())
        cut = asyncio.ensure_future(hang_up.wait())
        try:
            await asyncio.wait((message, cut), return_when=asyncio.FIRST_COMPLETED)
        finally:
            cut.cancel()
            if not message.done():
                message.cancel()
        return message.result() if not message.cancelled() else {"type": "http.disconnect"}

    return guarded_receive


async def _unavailable(path: str, send: Any) -> None:
    if path.startswith("/v1/"):
        body = error_body(path, 503, "The gateway is shutting down; send the request to another instance",
                          "overloaded_error")
    else:
        body = orjson.dumps({"status": "stopping"})
    await send({"type": "http.response.start", "status": 503,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"retry-after", b"1"), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def stop_gracefully_on_signals(drain: Drain) -> None:
    """Under Daphne, make SIGTERM and SIGINT drain before the reactor stops."""

    if "daphne.server" not in sys.modules:  # not running under Daphne: nothing to take over
        return
    from twisted.internet import reactor

    def take_over() -> None:  # after start-up: Twisted has installed its own handlers by then
        if threading.current_thread() is not threading.main_thread():
            return  # runserver's reloader runs Daphne in a thread, without signal handlers
        stopping: list[bool] = []

        def on_signal(signum: int, frame: Any) -> None:
            if stopping:  # asked twice: stop now
                reactor.callFromThread(reactor.stop)
                return
            stopping.append(True)
            reactor.callFromThread(lambda: asyncio.ensure_future(_drain_then_stop(drain, reactor)))

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, on_signal)

    reactor.callWhenRunning(take_over)


async def _drain_then_stop(drain: Drain, reactor: Any) -> None:
    try:
        await drain.stop(settings.GATEWAY_SHUTDOWN_GRACE)
    finally:
        reactor.stop()
