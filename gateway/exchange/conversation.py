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
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from accounts.db import DatabaseUnavailable, LoopSqlite, hop
from conversations import store
from translation import registry
from translation.ids import new_id
from translation.responses import conversation as items

from ..errors import InvalidRequest, UnknownResponse
from ..state import KeyInfo

if TYPE_CHECKING:
    from translation import ir

    from ..log.record import LogRecord
    from .routing import Route


class Answered(Protocol):
    """What storing an answer reads of its exchange (``gateway.exchange.exchange.Exchange``, which imports this)."""

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
# A commit waits this long for the answers that follow the first (seconds): each commit is a hop
# to a worker thread (a wake-up and two hand-overs of the GIL) and a transaction, so one per
# answer at a few hundred answers a second cost more than the rows. This process reads its own
# answers from the cache meanwhile; another process polls (``wait``), so nobody waits for it.
GATHER = 0.01


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
        upstream = registry.PROTOCOLS.get(last.upstream_protocol)  # None: an entry that names no protocol
        return (upstream is not None and upstream.KEEPS_STATE and last.provider_id == provider_id
                and last.account_id == account_id and bool(last.upstream_response_id))

    def passthrough_body(self, body: dict[str, Any], provider_id: int, account_id: int) -> dict[str, Any]:
        """The client's body for a Responses upstream account: the id as it issued it, or the conversation."""

        if self.forwardable(provider_id, account_id):
            return {**body, PARAM: self.entries[-1].upstream_response_id}
        return items.expanded(body, items.replayable(self.items(provider_id, account_id)))


async def previous_of(body: dict[str, Any], key: KeyInfo, stored: Conversations) -> Previous | None:
    """The conversation ``body`` continues, or None; a 404 for an id this key does not have."""

    wanted = body.get(PARAM)
    if wanted is None:
        return None
    if not isinstance(wanted, str) or not wanted:
        raise InvalidRequest(f"{PARAM}: must be a non-empty string", PARAM)
    try:
        return Previous(await stored.chain(wanted, key.id))
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


class Conversations:
    """The stored answers, written behind and read through a cache of the recent ones.

    ``keep`` puts an answer in this process's cache and queues it for the database: the client's
    last event no longer waits for a commit. A commit takes every answer queued while the one
    before it ran (one transaction for a group), so storing costs about one row's insert per answer,
    off the request. Reads look in the cache first, so a follow-up sent to this process the moment
    the client has the last event finds its answer before it is committed; on another process the
    read finds nothing yet, so it asks the database again for up to ``wait`` seconds before it says
    the id is unknown (a commit takes milliseconds; only an id that really is unknown waits it out).

    Every answer not committed yet stays in the cache as it is (a database that is away keeps them
    queued, retried at the next commit). A committed answer stays packed (its JSON, compressed: a
    small part of the parsed objects' memory) among the most recent ``capacity_bytes``; agents resend
    whole conversations, so a bound in answers would be no bound in memory."""

    def __init__(self, capacity_bytes: int = 8 * 1024 * 1024, wait: float = 2.0, poll: float = 0.05,
                 loop_db: LoopSqlite | None = None, gather: float = GATHER) -> None:
        self.capacity_bytes = capacity_bytes
        self.gather = gather
        self.loop_db = loop_db  # a SQLite file: ``taken`` reads it on the loop, without a hop
        self.wait = wait
        self.poll = poll
        self._pending: dict[tuple[int | None, str], store.Entry] = {}
        self._recent: OrderedDict[tuple[int | None, str], bytes] = OrderedDict()
        self._recent_bytes = 0
        self._queued: list[store.Entry] = []
        self._committing: asyncio.Task[None] | None = None

    # ---------------------------------------------------------------- writing

    def keep(self, entry: store.Entry) -> None:
        key = (entry.client_key_id, entry.response_id)
        self._forget(key)
        self._pending[key] = entry
        self._queued.append(entry)
        if self._committing is None or self._committing.done():
            self._committing = asyncio.get_running_loop().create_task(self._commit())

    async def _commit(self) -> None:
        await asyncio.sleep(self.gather)
        while self._queued:
            group, self._queued = self._queued, []
            try:
                packed = await hop(_save_and_pack, group)
            except Exception:  # noqa: BLE001 - kept queued (and served from the cache) for the next try
                log.warning("%d stored answer(s) not committed yet; retrying", len(group), exc_info=True)
                self._queued[:0] = group
                await asyncio.sleep(1.0)
                continue
            for entry, blob in zip(group, packed, strict=True):
                key = (entry.client_key_id, entry.response_id)
                if self._pending.get(key) is entry:  # not replaced or deleted meanwhile
                    del self._pending[key]
                    if blob is not None:
                        self._remember(key, blob)

    def _remember(self, key: tuple[int | None, str], blob: bytes) -> None:
        self._recent[key] = blob
        self._recent_bytes += len(blob)
        while self._recent_bytes > self.capacity_bytes and self._recent:
            _, oldest = self._recent.popitem(last=False)
            self._recent_bytes -= len(oldest)

    def _forget(self, key: tuple[int | None, str]) -> store.Entry | None:
        blob = self._recent.pop(key, None)
        if blob is not None:
            self._recent_bytes -= len(blob)
        return self._pending.pop(key, None)

    async def flush(self) -> None:
        """Commit what is queued (the gateway stopping)."""

        while self._committing is not None and not self._committing.done():
            await asyncio.wait({self._committing}, timeout=5.0)
            if self._queued and self._committing.done():
                self._committing = asyncio.get_running_loop().create_task(self._commit())

    # ---------------------------------------------------------------- reading

    def _cached(self, response_id: str, key_id: int | None) -> store.Entry | None:
        key = (key_id, response_id)
        entry = self._pending.get(key)
        if entry is not None:
            return entry
        blob = self._recent.get(key)
        if blob is None:
            return None
        self._recent.move_to_end(key)
        return store.Entry(**orjson.loads(zlib.decompress(blob)))

    async def taken(self, response_id: str, key_id: int | None) -> bool:
        """Whether ``key_id`` holds an answer of that id already (here or in the database)."""

        if self._cached(response_id, key_id) is not None:
            return True
        rows = self.loop_db.rows(*store.taken_query(response_id, key_id)) if self.loop_db is not None else None
        return bool(rows) if rows is not None else await hop(store.taken, response_id, key_id)

    async def find(self, response_id: str, key_id: int | None) -> store.Entry | None:
        entry = self._cached(response_id, key_id)
        if entry is not None:
            return entry
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait
        while True:
            # another process may be committing the answer right now
            found = await hop(store.find, response_id, key_id)
            if found is not None or loop.time() >= deadline:
                return found
            await asyncio.sleep(self.poll)

    async def chain(self, response_id: str, key_id: int | None) -> list[store.Entry]:
        """The response and every one before it, oldest first (``store.chain``), the recent ones from
        the cache; MissingLink names the first one missing."""

        newest: list[store.Entry] = []
        wanted = response_id
        while len(newest) < store.MAX_CHAIN:
            entry = self._cached(wanted, key_id)
            if entry is None:
                break
            newest.append(entry)
            wanted = entry.previous_response_id
            if not wanted:
                return newest[::-1]
        if len(newest) >= store.MAX_CHAIN:
            raise store.MissingLink(wanted)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait
        while True:
            try:
                older = await hop(store.chain, wanted, key_id)
                break
            except store.MissingLink as exc:
                # Only the newest link of what is read may still be on its way from another process.
                if exc.response_id != wanted or loop.time() >= deadline:
                    raise
            await asyncio.sleep(self.poll)
        return [*older, *newest[::-1]]

    async def find_with_input(self, response_id: str,
                              key_id: int | None) -> tuple[store.Entry, list[dict[str, Any]]] | None:
        entry = await self.find(response_id, key_id)
        if entry is None:
            return None
        before = await self.chain(entry.previous_response_id, key_id) if entry.previous_response_id else []
        return entry, [*store.conversation(before), *entry.input_items]

    async def delete(self, response_id: str, key_id: int | None) -> bool:
        pending = self._forget((key_id, response_id))
        if pending is not None:
            self._queued = [e for e in self._queued if e is not pending]
        return await hop(store.delete, response_id, key_id) or pending is not None


def _save_and_pack(group: list[store.Entry]) -> list[bytes | None]:
    """Commit a group, and pack each answer for the cache (None: one orjson cannot write, a lone
    surrogate say; the database has it, written the tolerant way)."""

    store.save_many(group)
    packed: list[bytes | None] = []
    for entry in group:
        try:
            # compressed: conversations repeat themselves, and orjson's own buffer is several times
            # the length it returns (a copy of exact size is made either way)
            packed.append(zlib.compress(orjson.dumps(entry), 1))
        except orjson.JSONEncodeError:
            packed.append(None)
    return packed


async def shown_id(ex: Answered, upstream_id: str | None, stored: Conversations) -> str | None:
    """The id the client is to see for a passed-through answer that will be kept: the upstream's,
    unless this key already holds an answer of that id (an upstream that repeats ids); then one of
    the gateway's own, so that both stay readable. None: nothing to change."""

    if not ex.passthrough or not upstream_id:
        return None
    try:
        if not await stored.taken(upstream_id, ex.key.id):
            return None
    except DatabaseUnavailable:
        return None  # kept under the upstream's id, as before; the newer answer wins the row
    return new_id("resp_")


def keep(ex: Answered, response: dict[str, Any], upstream_id: str | None, stored: Conversations) -> None:
    """Store the answer ``ex`` got (written behind: the client does not wait for the commit)."""

    response_id = response.get("id")
    if not isinstance(response_id, str) or not response_id or response.get("status") == "failed":
        return
    provider = ex.route.provider
    stored.keep(store.Entry(
        response_id=response_id, client_key_id=ex.key.id, response=response,
        input_items=items.input_items(ex.body),
        previous_response_id=ex.previous.id if ex.previous is not None else "",
        model=ex.request.model, upstream_protocol=provider.protocol, provider_id=provider.id,
        account_id=ex.record.account_id, upstream_response_id=upstream_id or "",
    ))
