"""Serving on Daphne (``daphne gateway.asgi:application``): the drain and the request limits that
:mod:`gateway.serve` gives uvicorn, set up when Twisted's reactor starts.

Daphne's command line imports ``daphne.server`` (which installs Twisted's asyncio reactor), then the
app, then starts the reactor; Twisted installs its own SIGTERM and SIGINT handlers as it starts. Those
stop the reactor at once, and Daphne then cancels every open request: streams end without their
protocol's ending and none of them reaches the request log. So :func:`adopt`, called as the app is
built, registers :func:`_on_start` with ``reactor.callWhenRunning``: it runs after Twisted has
installed its handlers and before the first connection is accepted. The app's first call would be too
late for both jobs: a SIGTERM before the first request would not drain, and the first connection's
head would already have been read under Twisted's defaults.

Signals: SIGTERM or SIGINT runs :meth:`gateway.edge.drain.Drain.stop` with ``GATEWAY_SHUTDOWN_GRACE``
(as :class:`gateway.serve.GatewayServer` does), then stops the reactor; a second signal stops it at
once. With nothing open the drain only flushes the request log and closes connections, so the stop is
immediate. Handlers are taken over only where Twisted installed its own (Daphne run with
``signal_handlers=False``, or in a thread, keeps whatever was there).

Limits, Twisted's own, set from the app's options (what each server enforces, side by side, is in
README's "Running it for real"):

- ``GATEWAY_MAX_HEAD_BYTES`` is ``HTTPChannel.totalHeadersSize`` (request line and header lines,
  without their line ends) and ``MAX_LENGTH`` (one line): past the total Twisted answers
  ``400 Bad Request`` with no body and closes; one line past it is closed without an answer.
  Twisted's ``maxHeaders`` (500 header lines, then 400) stays. uvicorn answers 431 in the caller's
  error envelope instead.
- ``GATEWAY_HEAD_TIMEOUT`` is the factory's ``timeOut``, Twisted's idle timeout: a connection that
  sends nothing for that long while no request of it is being served (before or inside its head or
  body, or kept alive between requests) is closed without an answer. Every read restarts it, so it
  bounds silence, not the time a whole head takes (a head trickled in slower is cut off by the size
  limit only). uvicorn answers 408 when the head is not complete in time, and keeps an idle
  connection 75 s.
- The body limit is the app's (:mod:`gateway.edge.bodylimit`), but Twisted reads a whole body (into a
  temporary file past 100 KB) before the app is called: a body over the limit is received in full
  before its 413, and a declared length never sent waits for the idle timeout.
- ``--http-timeout`` (a deadline on the whole response, which would cut long streams) is not used.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any

from ..options import Options

if TYPE_CHECKING:
    from .drain import Drain
    from .edge import Edge


def adopt(app: Edge) -> None:
    """Under Daphne (its server module imported, so its reactor installed): set up ``app`` when the reactor starts."""

    if "daphne.server" not in sys.modules:  # uvicorn, a test, a management command: nothing to do
        return
    from twisted.internet import reactor

    reactor.callWhenRunning(_on_start, reactor, app)


def _on_start(reactor: Any, app: Edge) -> None:
    bound_requests(reactor, app.gw.options)
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == reactor.sigTerm:
        DrainOnSignal(reactor, app.drain, app.gw.options.shutdown_grace).install()


def bound_requests(reactor: Any, options: Options) -> None:
    """Twisted's request-head limits, at the gateway's values, on every Daphne listener."""

    from daphne.http_protocol import HTTPFactory  # type: ignore[import-untyped]
    from twisted.web.http import HTTPChannel

    # Class attributes: Twisted builds its channels itself, and Daphne's is the process's only HTTP server.
    HTTPChannel.totalHeadersSize = options.max_head_bytes
    HTTPChannel.MAX_LENGTH = options.max_head_bytes
    for reader in reactor.getReaders():  # the listening ports, open since before the reactor started
        factory = getattr(reader, "factory", None)
        if isinstance(factory, HTTPFactory):
            factory.timeOut = options.head_timeout  # copied into each connection the factory builds


class DrainOnSignal:
    """SIGTERM or SIGINT drains, then stops the reactor; a second one stops it at once."""

    def __init__(self, reactor: Any, drain: Drain, grace: float) -> None:
        self.reactor = reactor
        self.drain = drain
        self.grace = grace
        self.draining: asyncio.Task[None] | None = None

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self.on_signal)
        if signal.getsignal(signal.SIGINT) == self.reactor.sigInt:  # Twisted leaves a debugger's SIGINT alone
            signal.signal(signal.SIGINT, self.on_signal)

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        # A signal handler runs between two bytecodes of the loop's thread: hand over to the loop, as Twisted does.
        self.reactor.callFromThread(self.signalled)

    def signalled(self) -> None:
        if self.draining is not None:  # asked twice: stop now
            self.stop_reactor()
            return
        self.draining = asyncio.get_running_loop().create_task(self._drain_then_stop())

    async def _drain_then_stop(self) -> None:
        try:
            await self.drain.stop(self.grace)
        finally:
            self.stop_reactor()

    def stop_reactor(self) -> None:
        from twisted.internet.error import ReactorNotRunning

        try:
            self.reactor.stop()
        except ReactorNotRunning:  # already stopping
            pass
