"""One client request on its way through the gateway: what the view made of it, what it holds, its record."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from accounts.headroom import Need
from signin import hints
from translation import ir, sse
from translation.protocol import ProtocolModule

from ..limits import Hold
from ..limits.estimate import input_tokens_of
from ..log.record import LogRecord
from ..state import KeyInfo
from . import conversation
from .routing import Route
from .session import Session


@dataclass
class Exchange:
    """One client request on its way through the gateway."""

    request_id: str
    client: ProtocolModule
    key: KeyInfo
    body: dict[str, Any]
    request: ir.Request
    route: Route
    # The client's headers and query string: what of them reaches the upstream is gateway.exchange.forwarding's call.
    headers: Mapping[str, str] = field(default_factory=dict)
    query: str = ""
    # Responses: the conversation previous_response_id names, and whether the answer is kept (gateway.exchange.conversation).
    previous: conversation.Previous | None = None
    keep: bool = False
    # Where on the provider the body goes when not the protocol's own PATH (``/responses/compact``).
    upstream_path: str | None = None
    started: float = field(default_factory=time.monotonic)
    record: LogRecord = field(init=False)
    finished: bool = field(default=False, init=False)  # its row is written (gateway.exchange.finish)
    # What the request holds against its key's limits; whoever ends the request settles it.
    hold: Hold | None = field(default=None, init=False)
    # The conversation the request belongs to (gateway.exchange.session) and the account that served it last.
    session: Session | None = None
    session_account: int | None = field(default=None, init=False)
    # The account whose concurrency slot the request holds, given back when it ends (gateway.exchange.selection).
    release: Callable[[], None] | None = field(default=None, init=False)
    # What goes upstream (the body with any conversation written out) and its size in bytes: what the
    # input is estimated from, for the accounts' rate limits and when a stream ends before the upstream
    # says what it used.
    sent: tuple[dict[str, Any], int] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.record = LogRecord(
            request_id=self.request_id, client_protocol=self.client.NAME, client_key_id=self.key.id,
            client_key_name=self.key.name, upstream_protocol=self.route.provider.protocol,
            provider_id=self.route.provider.id, model_requested=self.request.model,
            model_sent=self.route.upstream_model, stream=self.request.stream,
            user_id=self.key.user_id, team_id=self.key.team_id, surface=self.key.surface,
            **hints.read(self.headers),
        )

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def input_estimate(self) -> int:
        body, size = self.sent if self.sent is not None else (self.body, len(sse.dumps(self.body)))
        return input_tokens_of(self.client.NAME, body, size)

    def settle(self) -> None:
        """The request has ended: its slot and reservations go back, charged with what its record shows."""

        hold, self.hold = self.hold, None
        if hold is not None:
            hold.settle(self.record)
        self.let_go()

    def let_go(self) -> None:
        """Give back the account slot the request holds (its attempt ended)."""

        release, self.release = self.release, None
        if release is not None:
            release()

    @functools.cached_property
    def need(self) -> Need:
        """What the request takes of an account's rate limits (asked only when some are known)."""

        return Need(input_tokens=self.input_estimate())

    @property
    def previous_account(self) -> int | None:
        """The account that answered the stored response this request continues, on this provider."""

        if self.previous is None:
            return None
        last = self.previous.entries[-1]
        return last.account_id if last.provider_id == self.route.provider.id and last.account_id else None

    @property
    def passthrough(self) -> bool:
        return self.route.provider.protocol == self.client.NAME
