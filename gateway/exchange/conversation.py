"""Conversation state on every upstream: ``previous_response_id`` read, and answers kept.

A request naming a previous response gets the conversation that response stands for from the
gateway's own store (``conversations.store``), whatever upstream answered it:

- on a Chat or Anthropic upstream it is written out in full (every earlier input and output
  item, in order; earlier ``instructions`` are not inherited) and translated;
- on a Responses upstream the id goes up as that upstream issued it, but only to the account
  that answered the previous response: another account may belong to another organisation,
  which does not know the id. Any other account (or provider) gets the conversation written out
  as on the other upstreams, so a retry on the next account keeps the conversation instead of
  failing on it. The pick is not pinned to the first account: a disabled or cooling account
  would otherwise end the conversation.

An id the gateway does not know for the client's key (never stored, ``store: false``, deleted,
pruned, another key's) is a 404 naming ``previous_response_id``, never an answer without the
context. Answers are kept unless ``store`` is false, written before the client gets the end of
the answer (the last event of a stream), so a follow-up sent at once finds them, on any process.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from accounts.db import DatabaseUnavailable, hop
from conversations import store
from translation.responses import conversation as items

from ..errors import InvalidRequest, UnknownResponse
from ..state import KeyInfo

if TYPE_CHECKING:
    from translation import ir

    from ..log.record import LogRecord
    from .routing import Route


class Answered(Protocol):
    """What storing an answer reads of its exchange (``gateway.exchange.dispatch.Exchange``, which imports this)."""

    key: KeyInfo
    body: Any
    previous: Previous | None
    request: ir.Request
    route: Route
    record: LogRecord

    @property
    def passthrough(self) -> bool: ...

log = logging.getLogger(__name__)

PARAM = "previous_response_id"
RESPONSES = "responses"


def unknown(response_id: str, param: str | None = None) -> UnknownResponse:
    return UnknownResponse(f"Response with id '{response_id[:200]}' not found.", param)


@dataclass(frozen=True)
class Previous:
    """The stored responses a ``previous_response_id`` names, oldest first."""

    entries: list[store.Entry]

    @property
    def id(self) -> str:
        return self.entries[-1].response_id

    def items(self, provider_id: int, account_id: int | None = None) -> list[dict[str, Any]]:
        """The conversation for an upstream of ``provider_id`` (with ``account_id``: for that account):
        reasoning signed by another provider, or by another account of it, goes without its signature,
        which would be refused (a provider verifies reasoning against the organisation that produced it)."""

        out: list[dict[str, Any]] = []
        for entry in self.entries:
            said = store.conversation([entry])
            own = entry.provider_id == provider_id and account_id in (None, entry.account_id)
            out.extend(said if own else items.unsigned(said))
        return out

    def expanded(self, body: dict[str, Any], provider_id: int) -> dict[str, Any]:
        """The client's body with the conversation written out (for the request's parser)."""

        return items.expanded(body, self.items(provider_id))

    def forwardable(self, provider_id: int, account_id: int) -> bool:
        """The upstream account that answered the previous response is the one asked now."""

        last = self.entries[-1]
        return (last.upstream_protocol == RESPONSES and last.provider_id == provider_id
                and last.account_id == account_id and bool(last.upstream_response_id))

    def passthrough_body(self, body: dict[str, Any], provider_id: int, account_id: int) -> dict[str, Any]:
        """The client's body for a Responses upstream account: the id as it issued it, or the conversation."""

        if self.forwardable(provider_id, account_id):
            return {**body, PARAM: self.entries[-1].upstream_response_id}
        return items.expanded(body, items.replayable(self.items(provider_id, account_id)))


async def previous_of(body: dict[str, Any], key: KeyInfo) -> Previous | None:
    """The conversation ``body`` continues, or None; a 404 for an id this key does not have."""

    wanted = body.get(PARAM)
    if wanted is None:
        return None
    if not isinstance(wanted, str) or not wanted:
        raise InvalidRequest(f"{PARAM}: must be a non-empty string", PARAM)
    try:
        return Previous(await hop(store.chain, wanted, key.id))
    except store.MissingLink as exc:
        if exc.response_id == wanted:
            raise unknown(wanted, PARAM) from exc
        raise UnknownResponse(f"Response with id '{exc.response_id[:200]}', earlier in the conversation of "
                              f"'{wanted[:200]}', is no longer stored.", PARAM) from exc


def refuse_background(body: dict[str, Any]) -> None:
    """The gateway answers in the foreground only: a background response could be neither polled
    (``GET`` reads what was stored when it was answered) nor cancelled, so it is refused up front."""

    if body.get("background") is True:
        raise InvalidRequest("background: background responses are not supported by this gateway; "
                             "send the request without it (stream it to see progress)", "background")


def keeps(body: dict[str, Any]) -> bool:
    """Whether the answer is to be kept: the API's default is to store, ``store: false`` opts out."""

    return body.get("store") is not False


class Saver:
    """Answers stored in groups: each ``save`` waits until its answer is committed (a follow-up sent
    the moment the client has the last event must find it, on any process), but the answers that
    arrive while a commit is running share the next one. One commit per answer, each waiting its
    turn for the database, capped Responses traffic at what one connection commits (half the
    throughput of unstored answers on SQLite)."""

    def __init__(self) -> None:
        self._waiting: list[tuple[store.Entry, asyncio.Future[None]]] = []
        self._running = False

    async def save(self, entry: store.Entry) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((entry, done))
        if not self._running:
            self._running = True
            asyncio.get_running_loop().create_task(self._commit_groups())
        await done

    async def _commit_groups(self) -> None:
        try:
            while self._waiting:
                group, self._waiting = self._waiting, []
                try:
                    await hop(store.save_many, [entry for entry, _ in group])
                except Exception as exc:  # noqa: BLE001 - each waiting request hears it and logs it
                    for _, done in group:
                        if not done.done():
                            done.set_exception(exc)
                else:
                    for _, done in group:
                        if not done.done():
                            done.set_result(None)
        finally:
            self._running = False


async def keep(ex: Answered, response: dict[str, Any], upstream_id: str | None, saver: Saver) -> None:
    """Store the answer ``ex`` got; a failure is logged, the client still gets its answer."""

    response_id = response.get("id")
    if not isinstance(response_id, str) or not response_id or response.get("status") == "failed":
        return
    provider = ex.route.provider
    entry = store.Entry(
        response_id=response_id, client_key_id=ex.key.id, response=response,
        input_items=items.input_items(ex.body),
        previous_response_id=ex.previous.id if ex.previous is not None else "",
        model=ex.request.model, upstream_protocol=provider.protocol, provider_id=provider.id,
        account_id=ex.record.account_id,
        upstream_response_id=(response_id if ex.passthrough else upstream_id) or "",
    )
    try:
        await saver.save(entry)
    except (DatabaseUnavailable, Exception):  # noqa: BLE001 - the answer itself is not lost for it
        log.warning("response %s could not be stored", response_id, exc_info=True)
