"""The mock upstream's HTTP side (aiohttp.web): routing, auth, faults, streaming.

Scenario logic lives in :mod:`.scenarios`; this module only runs a plan through
the protocol's real encoder and writes every SSE event on its own.

Endpoints: ``POST /v1`` + each protocol's PATH (``/v1/chat/completions``,
``/v1/messages`` (``?beta=true`` too), ``/v1/responses``), ``GET /v1/models``,
and for tests ``GET /_mock/stats``, ``POST /_mock/reset``, ``GET /_mock/requests`` (each
recorded request with its headers, lower-cased, credentials left out), ``POST /_mock/cache``
``{"ttl_seconds": N, "clear": true}`` (the prompt cache's five-minute TTL, :mod:`.promptcache`; reset
restores the one the server started with), ``GET``/``POST /_mock/ratelimits`` (per-account rate
limits, :mod:`.ratelimits`), and
``POST /_mock/heal`` ``{"key_suffix": "ab12", "healed": true}``: keys ending so answer
as good keys do whatever fault marker they carry (``"healed": false`` breaks them
again; reset heals nothing), so a test or a walkthrough can watch a disabled account
come back once its upstream answers again.

The Anthropic endpoint is as strict as the real API about beta-only fields
(:mod:`.strict`): a field whose beta the ``anthropic-beta`` header does not name is a 400.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from translation import fold, ir, registry
from translation.protocol import EncodeContext, ProtocolModule
from translation.streams import StreamEncoder

from . import minted, promptcache, ratelimits, replay, scenarios, strict
from .scenarios import Ending, Fault, JsonMode, Pause, Plan, Raw

RECENT_REQUESTS = 50
MODELS_CREATED = 1_700_000_000
_INVALID = object()  # a body that is not JSON
CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "proxy-authorization", "cookie"})


@dataclass
class MockState:
    """Counters and the last requests; one per application."""

    requests: int = 0
    streams_open: int = 0
    streams_completed: int = 0
    streams_cancelled: int = 0
    bytes_streamed: int = 0  # body bytes written to streams (how far a slow reader let it get)
    by_key: Counter[str] = field(default_factory=Counter)
    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RECENT_REQUESTS))
    replays: dict[str, replay.Replay] = field(default_factory=dict)  # model → the exact answer
    healed: set[str] = field(default_factory=set)  # key suffixes whose fault marker is ignored
    cache: promptcache.PromptCache = field(default_factory=promptcache.PromptCache)  # per account key
    cache_ttl: float = promptcache.FIVE_MINUTES  # the one the server started with

    def fault_for(self, key: str) -> Fault | None:
        if any(key.endswith(suffix) for suffix in self.healed):
            return None
        return scenarios.fault_for_key(key)

    def stats(self) -> dict[str, Any]:
        return {"requests": self.requests, "streams_open": self.streams_open,
                "streams_completed": self.streams_completed,
                "streams_cancelled": self.streams_cancelled, "bytes_streamed": self.bytes_streamed,
                "by_key": dict(self.by_key),
                "cache": {shown: totals.as_dict() for shown, totals in self.cache.totals.items()}}

    def reset(self) -> None:
        # Streams still running keep their slot in streams_open.
        self.requests = self.streams_completed = self.streams_cancelled = self.bytes_streamed = 0
        self.by_key.clear()
        self.recent.clear()
        self.replays.clear()
        self.healed.clear()
        self.cache.clear()
        self.cache.ttl = self.cache_ttl


STATE = web.AppKey("mock_state", MockState)


# What api.anthropic.com tells a subscriber about its plan on every Messages answer: the pool's own
# standing, which a gateway must never pass to its clients. (An account's rate limits, the
# anthropic-ratelimit-{requests,tokens}-* family, come from ratelimits.py for a limited key.)
POOL_QUOTA_HEADERS = {
    "anthropic-ratelimit-unified-status": "allowed_warning", "anthropic-ratelimit-unified-reset": "1786147200",
    "anthropic-ratelimit-unified-representative-claim": "five_hour",
    "anthropic-ratelimit-unified-5h-utilization": "0.91",
}


async def _pool_quota(request: web.Request, response: web.StreamResponse) -> None:
    if request.path.startswith("/v1/messages"):
        response.headers.update(POOL_QUOTA_HEADERS)


def make_app(cache_ttl: float = promptcache.FIVE_MINUTES) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.on_response_prepare.append(_pool_quota)
    app[STATE] = MockState(cache=promptcache.PromptCache(cache_ttl), cache_ttl=cache_ttl)
    for proto in registry.PROTOCOLS.values():
        app.router.add_post("/v1" + proto.PATH, _protocol_handler(proto))
    app.router.add_post("/v1/messages/count_tokens", _count_tokens)
    app.router.add_post("/v1/responses/compact", _compact)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/_mock/stats", _stats)
    app.router.add_post("/_mock/reset", _reset)
    app.router.add_get("/_mock/requests", _requests)
    app.router.add_post("/_mock/replay", _add_replay)
    app.router.add_post("/_mock/heal", _heal)
    app.router.add_post("/_mock/cache", _cache)
    ratelimits.install(app)  # per-account rate limits (ratelimits.py): /_mock/ratelimits and the headers
    return app


def run(host: str = "127.0.0.1", port: int = 9300, cache_ttl: float = promptcache.FIVE_MINUTES) -> None:
    """Serve until interrupted (the management command's body)."""

    web.run_app(make_app(cache_ttl), host=host, port=port, access_log=None, handler_cancellation=True,
                shutdown_timeout=1.0, print=lambda _msg: None)


# ----------------------------------------------------------------- LLM endpoints


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _protocol_handler(proto: ProtocolModule) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await _serve(request, proto)

    return handler


async def _serve(request: web.Request, proto: ProtocolModule) -> web.StreamResponse:
    state = request.app[STATE]
    raw = await request.read()
    body = _decode(raw)
    key = _api_key(request)
    _record(state, request, raw, body, key)
    if key is None:
        return _fault_response(proto, scenarios.MISSING_KEY)
    model = body.get("model") if isinstance(body, dict) else None
    # Replays are keyed by name: any other model (a list, an object) is left to the 400 below.
    scripted = state.replays.get(model) if isinstance(model, str) else None
    if scripted is not None:
        return await replay.answer(request, scripted)
    fault = state.fault_for(key)
    if fault is not None and not fault.in_stream:
        return _fault_response(proto, fault, key)
    if body is _INVALID:
        return _json(400, proto.render_error(400, "Could not parse the request body as JSON.",
                                             "invalid_request_error"))
    if proto.NAME == "anthropic":
        refused = strict.refusal(body, request.headers.getall("anthropic-beta", []))
        if refused is not None:
            return _json(400, proto.render_error(400, refused, "invalid_request_error"))
    try:
        req = proto.parse_request(body)
    except ir.InvalidRequest as exc:
        return _json(400, proto.render_error(400, exc.message, "invalid_request_error", exc.param))
    if req.model == scenarios.TOO_LONG_MODEL:
        return _json(400, scenarios.too_long(proto))
    if (limited := ratelimits.admit(request, key, proto, scenarios.estimate_input_tokens(req))) is not None:
        return limited
    if (elsewhere := minted.refusal(proto.NAME, body, key)) is not None:
        return _fault_response(proto, Fault(400, elsewhere.message, elsewhere.code),
                               error_type="invalid_request_error")
    stream = isinstance(body, dict) and body.get("stream") is True
    if fault is not None and not stream:
        return _fault_response(proto, fault, key)
    if fault is not None:
        plan = scenarios.stream_error_plan(req, proto.NAME, fault)
    else:
        plan = scenarios.plan(req, proto.NAME)
        _as_this_account(state, plan, proto.NAME, key, body, req)
    ctx = EncodeContext(model=req.model, request=req, body=body if isinstance(body, dict) else {})
    if stream:
        encoder: StreamEncoder = (scenarios.NonstandardChatEncoder() if plan.nonstandard
                                  else proto.stream_encoder(ctx))
        return await _stream(request, plan, encoder, state)
    return await _answer(request, plan, proto, ctx)


def _as_this_account(state: MockState, plan: Plan, protocol: str, key: str, body: Any, req: ir.Request) -> None:
    """The plan's usage as the account's prompt cache has it, its signatures minted for the account."""

    events = [*plan.steps, *plan.answer]
    minted.bind(events, key)
    input_tokens = scenarios.estimate_input_tokens(req)
    shown = "..." + (_key_suffix(key) or "")
    if protocol == "anthropic":
        hit = state.cache.anthropic(key, shown, body, input_tokens)
    else:
        hit = state.cache.openai(key, shown, req, input_tokens)
    promptcache.apply(events, hit, anthropic=protocol == "anthropic")


async def _answer(request: web.Request, plan: Plan, proto: ProtocolModule,
                  ctx: EncodeContext) -> web.StreamResponse:
    if plan.json_mode is JsonMode.ABORT:
        _drop_connection(request)
        return web.Response()  # never sent: aiohttp finds the transport closed
    if plan.json_mode is JsonMode.STALL:
        await _idle(request, scenarios.STALL_SECONDS)
    elif plan.json_delay:
        await _idle(request, plan.json_delay)
    return _json(200, proto.render_response(fold.fold(plan.answer), ctx))


async def _stream(request: web.Request, plan: Plan, encoder: StreamEncoder,
                  state: MockState) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                       "Cache-Control": "no-cache"})
    if plan.close_connection:
        resp.force_close()
    await resp.prepare(request)  # headers go out now, before any pause
    state.streams_open += 1
    completed = False
    try:
        for step in plan.steps:
            if isinstance(step, Pause):
                if not await _idle(request, step.seconds):
                    raise ConnectionResetError("client went away")
            elif isinstance(step, Raw):
                await resp.write(step.data)
                state.bytes_streamed += len(step.data)
            else:
                for chunk in encoder.feed(step):
                    await resp.write(chunk)
                    state.bytes_streamed += len(chunk)
        completed = await _end(request, resp, plan.ending, encoder)
    except (ConnectionError, asyncio.CancelledError):
        completed = False
        raise
    finally:
        state.streams_open -= 1
        if completed:
            state.streams_completed += 1
        else:
            state.streams_cancelled += 1
    return resp


async def _end(request: web.Request, resp: web.StreamResponse, ending: Ending,
               encoder: StreamEncoder) -> bool:
    """Write the plan's ending; True when it ran to its end with the client still there."""

    match ending:
        case Ending.FINISH:
            for chunk in encoder.finish():
                await resp.write(chunk)
        case Ending.TRUNCATE:
            pass
        case Ending.STALL:
            if not await _idle(request, scenarios.STALL_SECONDS):
                return False
        case Ending.ABORT:
            _drop_connection(request)
            return True
    await resp.write_eof()
    return True


# ----------------------------------------------------------------- helpers


def _decode(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _INVALID


def _api_key(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    if auth[:7].lower() == "bearer " and auth[7:].strip():
        return auth[7:].strip()
    return request.headers.get("x-api-key", "").strip() or None


def _key_suffix(key: str | None) -> str | None:
    """The key's last 4 characters; nothing for keys too short to hide the rest."""

    if key is None:
        return None
    return key[-4:] if len(key) >= 8 else ""


def _record(state: MockState, request: web.Request, raw: bytes, body: Any,
            key: str | None) -> None:
    suffix = _key_suffix(key)
    state.requests += 1
    if suffix is not None:
        state.by_key["..." + suffix] += 1
    state.recent.append({
        "path": request.path, "query": request.query_string, "key_suffix": suffix,
        "headers": _recorded_headers(request),
        "body": raw.decode("utf-8", "replace") if body is _INVALID else body,
    })


def _recorded_headers(request: web.Request) -> dict[str, str]:
    """Lower-cased names, repeated headers joined with ", " (as HTTP reads them), no credentials."""

    headers: dict[str, str] = {}
    for name, value in request.headers.items():
        name = name.lower()
        if name not in CREDENTIAL_HEADERS:
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


def _fault_response(proto: ProtocolModule, fault: Fault, key: str = "", error_type: str | None = None) -> web.Response:
    body = proto.render_error(fault.status, fault.message, error_type)
    err = body.get("error")
    if fault.code and isinstance(err, dict) and "code" in err:
        err["code"] = fault.code  # OpenAI-style envelopes carry a machine-readable code
    raw = orjson.dumps(body).replace(scenarios.ECHO_KEY.encode(), scenarios.escaped_key(key))
    return web.Response(status=fault.status, body=raw, content_type="application/json", headers=fault.headers)


def _json(status: int, obj: Any, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(obj), content_type="application/json",
                        headers=headers)


def _gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


async def _idle(request: web.Request, seconds: float) -> bool:
    """Wait ``seconds``; False as soon as the client has gone away."""

    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while (left := deadline - loop.time()) > 0:
        if _gone(request):
            return False
        await asyncio.sleep(min(left, 0.25))
    return not _gone(request)


def _drop_connection(request: web.Request) -> None:
    """Close the TCP connection: what was written is flushed, nothing more is sent."""

    if request.transport is not None:
        request.transport.close()


# ----------------------------------------------------------------- other endpoints


async def _models(request: web.Request) -> web.Response:
    data = [{"id": m, "object": "model", "created": MODELS_CREATED, "owned_by": "mock"}
            for m in scenarios.MODELS]
    return _json(200, {"object": "list", "data": data})


async def _received(request: web.Request, proto: Any) -> tuple[Any, web.Response | None]:
    """A side endpoint's body, recorded, with the fault its key asks for (or None)."""

    raw = await request.read()
    body = _decode(raw)
    key = _api_key(request)
    _record(request.app[STATE], request, raw, body, key)
    fault = scenarios.MISSING_KEY if key is None else request.app[STATE].fault_for(key)
    return body, (_fault_response(proto, fault, key or "") if fault is not None else None)


async def _count_tokens(request: web.Request) -> web.Response:
    """Anthropic's count_tokens, answering the length of the JSON of ``messages``: a number the
    gateway's own estimate (about a quarter of it) never gives, so tests can tell the two apart."""

    proto = registry.get("anthropic")
    body, refused = await _received(request, proto)
    if refused is not None:
        return refused
    if missing := scenarios.missing_count_tokens(_api_key(request) or ""):
        return web.Response(status=missing, text="404 page not found" if missing == 404 else "",
                            content_type="text/plain")
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return _json(400, proto.render_error(400, "messages: Field required", "invalid_request_error"))
    return _json(200, {"input_tokens": len(orjson.dumps(body["messages"]))})


async def _compact(request: web.Request) -> web.Response:
    """OpenAI's ``/v1/responses/compact``: the user messages of ``input`` and one compaction item
    whose content is this upstream's own (``mock-upstream-compaction-<hex>``), not a gateway's. With
    ``previous_response_id`` and no ``input``, the compaction item alone."""

    proto = registry.get("responses")
    body, refused = await _received(request, proto)
    if refused is not None:
        return refused
    items = body.get("input") if isinstance(body, dict) else None
    if items is None and isinstance(body, dict) and isinstance(body.get("previous_response_id"), str):
        items = []  # by reference: the scripted upstream keeps no conversations, so none of its messages return
    if not isinstance(items, list):
        return _json(400, proto.render_error(400, "input: expected a list of items", "invalid_request_error",
                                             "input"))
    kept = [i for i in items if isinstance(i, dict) and i.get("type", "message") == "message"
            and i.get("role") == "user"]
    item = {"type": "compaction", "id": "cmp_" + uuid.uuid4().hex,
            "encrypted_content": "mock-upstream-compaction-" + uuid.uuid4().hex}
    return _json(200, {"id": "resp_" + uuid.uuid4().hex, "object": "response.compaction",
                       "created_at": int(time.time()), "output": [*kept, item],
                       "usage": {"input_tokens": 12, "output_tokens": 3, "total_tokens": 15}})


async def _stats(request: web.Request) -> web.Response:
    return _json(200, request.app[STATE].stats())


async def _reset(request: web.Request) -> web.Response:
    request.app[STATE].reset()
    request.app[ratelimits.STATE].reset()
    return _json(200, request.app[STATE].stats())


async def _add_replay(request: web.Request) -> web.Response:
    model, scripted = replay.parse(await request.json())
    request.app[STATE].replays[model] = scripted
    return _json(200, {"model": model})


async def _heal(request: web.Request) -> web.Response:
    body = await request.json()
    suffix = body.get("key_suffix") if isinstance(body, dict) else None
    if not isinstance(suffix, str) or len(suffix) < 4:
        return _json(400, {"error": "key_suffix: at least the key's last 4 characters"})
    healed = request.app[STATE].healed
    if body.get("healed", True):
        healed.add(suffix)
    else:
        healed.discard(suffix)
    return _json(200, {"healed": sorted(healed)})


async def _cache(request: web.Request) -> web.Response:
    body = await request.json()
    cache = request.app[STATE].cache
    ttl = body.get("ttl_seconds") if isinstance(body, dict) else None
    if ttl is not None:
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl <= 0:
            return _json(400, {"error": "ttl_seconds: a positive number of seconds"})
        cache.ttl = float(ttl)
    if isinstance(body, dict) and body.get("clear") is True:
        cache.clear()
    return _json(200, {"ttl_seconds": cache.ttl})


async def _requests(request: web.Request) -> web.Response:
    return _json(200, {"requests": list(request.app[STATE].recent)})


# ----------------------------------------------------------------- in-process server


class ServerThread:
    """The mock upstream on its own event loop in a daemon thread (tests, bench).

    ``with ServerThread() as server: server.url`` — port 0 picks a free port.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, cache_ttl: float = promptcache.FIVE_MINUTES) -> None:
        self.host, self.port = host, port
        self.app = make_app(cache_ttl)
        self._loop = asyncio.new_event_loop()
        self._runner = web.AppRunner(self.app, access_log=None, handler_cancellation=True,
                                     shutdown_timeout=0.5)
        self._thread = threading.Thread(target=self._loop.run_forever, name="mockupstream",
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def state(self) -> MockState:
        return self.app[STATE]

    def start(self) -> ServerThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    async def _start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
