"""In-process stand-ins for the app object's parts, so a unit test builds a whole gateway in microseconds.

- :class:`FakePool` picks unsaved :class:`accounts.models.Account` objects in the order given
  and remembers what it was asked to disable;
- :class:`FakeUpstream` answers each account (by its secret) from a script of :class:`Reply`:
  JSON, SSE bytes cut anywhere, error statuses with headers, a refused connection, a
  connection lost mid-body, a stall;
- :func:`config` is a real :class:`gateway.state.SnapshotCache` over a fixed snapshot;
- :class:`RecordingLog` keeps the request-log records instead of writing them;
- :func:`asgi_call` drives an ASGI app (the edge) the way a server would;
- :func:`exchange` and :func:`stream_of` send one client request through the dispatch loop and
  read what its client gets; :func:`chunk` and :func:`chat_stream` write Chat's wire shapes (as
  OpenAI documents them) and :func:`events` reads any SSE back.

Nothing here touches the database or the network.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import orjson
from multidict import CIMultiDict, CIMultiDictProxy

from accounts.db import DatabaseUnavailable
from accounts.models import Account, default_rules
from accounts.secrets import hash_client_key
from gateway.app import Gateway
from gateway.background.poolhealth import PoolHealth
from gateway.background.prober import Prober
from gateway.edge.api import api_routes
from gateway.edge.responses import ApiResponse
from gateway.exchange.dispatch import dispatch
from gateway.exchange.exchange import Exchange
from gateway.exchange.routing import Route
from gateway.exchange.upstream import UpstreamClient, UpstreamResponse, UpstreamTarget
from gateway.limits import Limits
from gateway.log.writer import LogRecord, LogWriter
from gateway.options import Options
from gateway.state import AliasInfo, KeyInfo, ProviderInfo, Snapshot, SnapshotCache
from translation import registry
from translation.ir import UpstreamCaps

T = TypeVar("T")


def run(work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``work()`` on a fresh event loop, as a server would run it."""

    return asyncio.run(work())


# ----------------------------------------------------------------- configuration


def provider(id: int = 1, protocol: str = "openai_chat", *, name: str = "", idle_timeout: float = 5.0,
             first_byte_timeout: float = 5.0, rules: list[dict[str, Any]] | None = None,
             served_models: Sequence[str] = ()) -> ProviderInfo:
    """A provider as the snapshot knows it, with the default classification rules."""

    return ProviderInfo(id=id, name=name or f"up-{id}", protocol=protocol, base_url=f"http://upstream-{id}.test/v1",
                        headers={}, served_models=tuple(served_models), selection="lru", connect_timeout=1.0,
                        first_byte_timeout=first_byte_timeout, idle_timeout=idle_timeout, proxy_url="",
                        caps=UpstreamCaps(), anthropic_version="2023-06-01",
                        rules=default_rules() if rules is None else rules)


_key_ids = itertools.count(1)


def client_key(plain: str = "gw-unit-key", *, name: str = "unit", allowed_models: Sequence[str] = (),
               rate_limit_per_minute: int | None = None, daily_token_limit: int | None = None) -> KeyInfo:
    return KeyInfo(next(_key_ids), name, tuple(allowed_models), rate_limit_per_minute, daily_token_limit)


def snapshot(providers: Iterable[ProviderInfo], keys: Mapping[str, KeyInfo] = {},
             aliases: Iterable[AliasInfo] = ()) -> Snapshot:
    """``keys``: plain client key → its info (stored by hash, as the real snapshot keeps them)."""

    return Snapshot(providers={p.id: p for p in providers}, aliases=list(aliases),
                    keys={hash_client_key(plain): info for plain, info in keys.items()})


def config(snap: Snapshot, ttl: float = 3600.0, find_key: Callable[[str], KeyInfo | None] | None = None
           ) -> SnapshotCache:
    """The real configuration cache, reading ``snap`` instead of the database."""

    return SnapshotCache(ttl, load=lambda: snap, find_key=find_key or (lambda digest: None),
                         find_bearer=lambda digest: None)


def account(pk: int, secret: str, provider_id: int = 1, label: str = "") -> Account:
    """An unsaved account with its secret set (encrypted as a saved one would be)."""

    acc = Account(id=pk, provider_id=provider_id, label=label or f"a{pk}")
    acc.set_secret(secret)
    return acc


# ----------------------------------------------------------------- the pool


@dataclass
class Disabled:
    account_id: int
    rule: str
    tier: str
    status_code: int | None
    excerpt: str
    cooldown_until: dt.datetime | None
    retest_after: float | None = None


class FakePool:
    """accounts.pool.Pool over a fixed list: picks the first usable account in the given order."""

    def __init__(self, accounts: Iterable[Account] = (), unavailable: bool = False) -> None:
        self.accounts = list(accounts)
        self.unavailable = unavailable
        self.picks: list[int] = []
        self.disabled: dict[int, Disabled] = {}
        self.closed = False

    async def pick(self, provider_id: int, exclude: Sequence[int], strategy: str,
                   prefer: int | None = None) -> Account | None:
        if self.unavailable:
            raise DatabaseUnavailable("the database is down")
        order = sorted(self.accounts, key=lambda a: a.pk != prefer)  # the preferred first, the rest as given
        for acc in order:
            if acc.provider_id == provider_id and acc.pk not in exclude and acc.pk not in self.disabled:
                self.picks.append(acc.pk)
                return acc
        return None

    async def disable(self, account_id: int, *, rule: str, tier: str, status_code: int | None, excerpt: str,
                      cooldown_until: dt.datetime | None = None, retest_after: float | None = None) -> bool:
        if account_id in self.disabled:
            return False
        self.disabled[account_id] = Disabled(account_id, rule, tier, status_code, excerpt, cooldown_until,
                                             retest_after)
        return True

    def on_state_change(self, sender: Any, account_id: int, status: str,
                        cooldown_until: dt.datetime | None, **kwargs: Any) -> None:
        pass

    def invalidate(self, **kwargs: Any) -> None:
        pass

    def flush(self) -> None:
        pass

    async def aclose(self) -> None:
        self.closed = True


# ----------------------------------------------------------------- the upstream

Step = bytes | float  # a chunk of the body, or seconds of silence before the next


@dataclass
class Reply:
    """One scripted upstream answer."""

    status: int = 200
    body: list[Step] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    lost: bool = False  # the connection drops after the body (aiohttp.ClientPayloadError)
    stall: bool = False  # silence after the body, until the reader gives up
    refused: bool = False  # send() fails: nothing came back (aiohttp.ClientConnectionError)


def json_reply(obj: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Reply:
    return Reply(status, [orjson.dumps(obj)], {"content-type": "application/json", **(headers or {})})


def error_reply(status: int, message: str, error_type: str = "api_error", *, retry_after: str | None = None,
                anthropic: bool = False) -> Reply:
    """An error answer in OpenAI's envelope (or Anthropic's)."""

    obj: dict[str, Any] = ({"type": "error", "error": {"type": error_type, "message": message}} if anthropic
                           else {"error": {"message": message, "type": error_type, "param": None, "code": None}})
    return json_reply(obj, status, {"retry-after": retry_after} if retry_after is not None else None)


def sse(*events: Any) -> bytes:
    """SSE bytes: a dict is one event's JSON data (with an ``event:`` line when it has a ``type``,
    as Anthropic and Responses name theirs), a string is raw data (``[DONE]``)."""

    out = bytearray()
    for event in events:
        if isinstance(event, dict):
            if "type" in event:
                out += b"event: " + str(event["type"]).encode() + b"\n"
            out += b"data: " + orjson.dumps(event) + b"\n\n"
        else:
            out += b"data: " + str(event).encode() + b"\n\n"
    return bytes(out)


def cut(data: bytes, size: int) -> list[Step]:
    """``data`` in reads of ``size`` bytes, cut wherever that falls (mid-line, mid-character)."""

    return [data[i:i + size] for i in range(0, len(data), size)]


def sse_reply(*events: Any, size: int | None = None, lost: bool = False, stall: bool = False) -> Reply:
    data = sse(*events)
    return Reply(200, cut(data, size) if size else [data], {"content-type": "text/event-stream"},
                 lost=lost, stall=stall)


def refused() -> Reply:
    return Reply(refused=True)


class FakeResponse(UpstreamResponse):
    __slots__ = ("reply", "closed", "read_to_end")

    def __init__(self, reply: Reply) -> None:  # no aiohttp response underneath
        self.reply = reply
        self.status_code = reply.status
        self.headers = CIMultiDictProxy(CIMultiDict(reply.headers))
        self.closed = False
        self.read_to_end = False

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        for step in self.reply.body:
            if isinstance(step, float):
                await asyncio.sleep(step)
                continue
            await asyncio.sleep(0)  # each chunk is a read of its own
            yield step
        if self.reply.lost:
            raise aiohttp.ClientPayloadError("Response payload is not completed")
        if self.reply.stall:
            await asyncio.Event().wait()
        self.read_to_end = True

    async def aread(self) -> bytes:
        return b"".join([chunk async for chunk in self.aiter_raw()])

    async def aclose(self) -> None:
        self.closed = True


@dataclass
class Call:
    secret: str
    path: str
    body: Any
    response: FakeResponse | None


class FakeUpstream(UpstreamClient):
    """Answers by the account's secret: one reply for every call, or a list answered in order
    (its last reply repeated); ``default`` for secrets not in the script."""

    def __init__(self, script: Mapping[str, Reply | Sequence[Reply]] | None = None,
                 default: Reply | None = None) -> None:
        super().__init__()
        self.script = dict(script or {})
        self.default = default
        self.calls: list[Call] = []
        self._seen: dict[str, int] = {}

    def _reply(self, secret: str) -> Reply:
        entry = self.script.get(secret, self.default)
        if entry is None:
            raise AssertionError(f"no reply scripted for the account with key {secret!r}")
        if isinstance(entry, Reply):
            return entry
        n = self._seen[secret] = self._seen.get(secret, -1) + 1
        return entry[min(n, len(entry) - 1)]

    async def send(self, target: UpstreamTarget, body: bytes) -> UpstreamResponse:
        reply = self._reply(target.secret)
        await asyncio.sleep(0)
        if reply.refused:
            self.calls.append(Call(target.secret, target.path, orjson.loads(body), None))
            raise aiohttp.ClientConnectionError("Cannot connect to host upstream.test: Connection refused")
        response = FakeResponse(reply)
        self.calls.append(Call(target.secret, target.path, orjson.loads(body), response))
        return response

    async def post_read(self, target: UpstreamTarget, body: bytes) -> tuple[int, bytes]:
        response = await self.send(target, body)
        try:
            return response.status_code, await response.aread()
        finally:
            await response.aclose()

    async def get_json(self, provider: ProviderInfo, secret: str, path: str) -> Any:
        reply = self._reply(secret)
        if reply.refused:
            raise aiohttp.ClientConnectionError("Connection refused")
        return orjson.loads(b"".join(s for s in reply.body if isinstance(s, bytes)))

    async def aclose(self) -> None:
        pass

    @property
    def secrets(self) -> list[str]:
        """The accounts called, in order."""

        return [c.secret for c in self.calls]


# ----------------------------------------------------------------- the rest of the app


class RecordingLog(LogWriter):
    """The request-log writer, keeping each record submitted instead of writing it."""

    def __init__(self, body_limit: int | None = None) -> None:
        super().__init__(body_limit=body_limit)
        self.records: list[LogRecord] = []

    def submit(self, record: LogRecord) -> None:
        self.records.append(record)

    def flush(self) -> int:
        return 0


class IdleProber(Prober):
    """No account tests in the background (the real prober reads the database)."""

    def __init__(self) -> None:
        pass

    async def run(self) -> None:
        await asyncio.Event().wait()


class IdleHealth(PoolHealth):
    """No pool duties in the background (the real ones need the database and its lease)."""

    def __init__(self) -> None:
        pass

    async def run(self) -> None:
        await asyncio.Event().wait()

    async def aclose(self) -> None:
        pass


@dataclass
class Rig:
    gw: Gateway
    pool: FakePool
    upstream: FakeUpstream
    log: RecordingLog


def rig(snap: Snapshot, accounts: Iterable[Account] = (), upstream: FakeUpstream | None = None,
        options: Options | None = None, limits: Limits | None = None, unavailable: bool = False) -> Rig:
    """A gateway on fakes: ``snap`` for configuration, ``accounts`` for the pool."""

    pool = FakePool(accounts, unavailable)
    up = upstream or FakeUpstream()
    log = RecordingLog()
    gw = Gateway(options or Options(keepalive_seconds=5.0), api_routes(), pool=pool, upstream=up, log_writer=log,
                 config=config(snap), limits=limits or Limits(), prober=IdleProber(), health=IdleHealth())
    return Rig(gw, pool, up, log)


# ----------------------------------------------------------------- ASGI


@dataclass
class Answer:
    status: int
    headers: CIMultiDict[str]
    body: bytes
    chunks: list[bytes]  # the body as sent, one entry per http.response.body message

    def json(self) -> Any:
        return orjson.loads(self.body)


class Client:
    """One ASGI exchange: the request's body as given, then silence until :meth:`hang_up`."""

    def __init__(self, body: bytes | Sequence[bytes] = b"") -> None:
        self.parts = [body] if isinstance(body, bytes) else list(body)
        self.gone = asyncio.Event()
        self.read_all = False

    def hang_up(self) -> None:
        self.gone.set()

    async def receive(self) -> dict[str, Any]:
        if self.parts:
            part = self.parts.pop(0)
            self.read_all = not self.parts
            return {"type": "http.request", "body": part, "more_body": bool(self.parts)}
        await self.gone.wait()
        return {"type": "http.disconnect"}


async def asgi_call(app: Any, method: str, path: str, body: bytes | Sequence[bytes] = b"",
                    headers: Mapping[str, str] | None = None, client: Client | None = None,
                    query: str = "") -> Answer:
    """``app`` serving one request; a list ``body`` arrives in that many parts without a length
    (chunked) unless ``content-length`` is among ``headers``."""

    client = client or Client(body)
    raw_headers = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": query.encode(),
             "root_path": "", "headers": raw_headers, "client": ("127.0.0.1", 50000),
             "server": ("127.0.0.1", 8000)}
    status = 0
    head: CIMultiDict[str] = CIMultiDict()
    chunks: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            for name, value in message.get("headers", ()):
                head.add(name.decode("latin1"), value.decode("latin1"))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, client.receive, send)
    return Answer(status, head, b"".join(chunks), chunks)


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}", "content-type": "application/json"}


# ----------------------------------------------------------------- exchanges and wire shapes


def chat_body(stream: bool = False, model: str = "m-1") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "Hi"}], "stream": stream}


def anthropic_body(stream: bool = False, model: str = "m-1") -> dict[str, Any]:
    return {"model": model, "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}], "stream": stream}


UNIT_KEY = client_key()


def exchange(client: str, body: dict[str, Any], prov: ProviderInfo) -> Exchange:
    proto = registry.get(client)
    return Exchange("req_unit", proto, UNIT_KEY, body, proto.parse_request(body), Route(prov, body["model"]))


def chat_answer(text: str, model: str = "m-1", **extra: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}, **extra}


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m-1",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def chat_stream(*texts: str) -> list[Any]:
    """A Chat stream of ``texts`` with usage and ``[DONE]``, as OpenAI documents it."""

    return [chunk({"role": "assistant", "content": ""}), *(chunk({"content": t}) for t in texts),
            chunk({}, "stop"),
            {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m-1", "choices": [],
             "usage": {"prompt_tokens": 7, "completion_tokens": len(texts), "total_tokens": 7 + len(texts)}},
            "[DONE]"]


async def body_of(response: ApiResponse) -> bytes:
    if response.stream is not None:
        return b"".join([bytes(part) async for part in response.stream])
    return response.body


def events(raw: bytes) -> list[tuple[str | None, Any]]:
    """(event name, data) of each SSE event the client got; data parsed when it is JSON."""

    out: list[tuple[str | None, Any]] = []
    for block in raw.decode().split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            text = "\n".join(data)
            out.append((name, text if text == "[DONE]" else orjson.loads(text)))
    return out


def chat_text(raw: bytes) -> str:
    return "".join(d["choices"][0]["delta"].get("content") or "" for _, d in events(raw)
                   if isinstance(d, dict) and d.get("choices"))


async def stream_of(r: Rig, ex: Exchange) -> bytes:
    """What the client of ``ex`` reads, streamed or not, once the dispatch loop has answered."""

    return await body_of(await dispatch(r.gw, ex))
