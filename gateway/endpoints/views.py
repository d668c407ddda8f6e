"""The API surface. Views are thin: each step is a named function elsewhere.

Each view takes the app object (``gateway.app.Gateway``) and the request
(``gateway.edge.request.ApiRequest``) and returns an ``ApiResponse``; the route table (``gateway.edge.routes``) says which view serves which path.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from django.db import connection
from prometheus_client import CONTENT_TYPE_LATEST

from accounts.db import DatabaseUnavailable, hop
from accounts.outcomes import ErrorClass
from signin import hints
from translation import ir, registry, sse
from translation.ids import new_id
from translation.protocol import ProtocolModule

from ..app import Gateway
from ..edge.request import ApiRequest
from ..edge.responses import ApiResponse, error_response, json_response, text_response
from ..errors import (
    AuthenticationFailed,
    GatewayError,
    InvalidRequest,
    ModelNotFound,
    NestingTooDeep,
    PayloadTooLarge,
    status_of,
    unavailable,
)
from ..exchange import conversation
from ..exchange.dispatch import dispatch
from ..exchange.exchange import Exchange
from ..exchange.finish import finish, refused
from ..exchange.routing import Route, check_allowed, may_use, resolve, shown
from ..exchange.session import session_of
from ..limits import request_estimate
from ..log.record import LogRecord
from ..state import KeyInfo
from . import compaction, model_shapes
from .auth import authenticate
from .count_tokens import count_input_tokens
from .messages_fields import MESSAGES, MessagesFields
from .models_list import entry_for

log = logging.getLogger(__name__)


def json_object(raw: bytes | str, what: str) -> dict[str, Any]:
    """``raw`` read as a JSON object, else a 400 naming ``what`` ("request body", a websocket "message")."""

    try:
        body = sse.loads(raw)
    except ValueError as exc:
        raise InvalidRequest(f"The {what} is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidRequest(f"The {what} must be a JSON object")
    return body


def check_nesting(raw: bytes | str, body: Any) -> None:
    """A 400 for ``body`` (read from ``raw``) nested too deeply to be written out again.

    orjson reads 1024 levels of nesting but writes only 254, and fields the upstream never sees are
    still echoed into answers (a Responses text.format schema): too deep, it broke the answer midway.
    Only a body with more brackets than that can be too deep, so nearly every body costs a count.
    """

    brackets = raw.count(b"[") + raw.count(b"{") if isinstance(raw, bytes) else raw.count("[") + raw.count("{")
    if brackets > 254:
        try:
            sse.dumps(body)
        except TypeError as exc:
            raise NestingTooDeep from exc


def parse_body(request: ApiRequest) -> Any:
    if request.parsed is not None:
        return request.parsed  # its transport read it, within the same limits
    raw = request.body
    if not raw.strip():
        raise InvalidRequest("The request body is empty; send a JSON object")
    body = json_object(raw, "request body")
    check_nesting(raw, body)
    return body


def parse_request(proto: ProtocolModule, body: Any) -> ir.Request:
    try:
        return proto.parse_request(body)
    except ir.InvalidRequest as exc:
        raise InvalidRequest(exc.message, exc.param) from exc


def _log_rejected(gw: Gateway, proto: ProtocolModule, key: KeyInfo | None, body: Any, err: GatewayError,
                  request: ApiRequest, started: float) -> None:
    """The row of a request refused before dispatch. A key refused as unknown is logged as no key at
    all: what was presented is never stored, whether a typo of a real key or a guess. A key refused
    as inactive (found by the same hash) is logged by its name."""

    model = body.get("model") if isinstance(body, dict) else None
    record = LogRecord(
        request_id=new_id("req_"), client_protocol=proto.NAME, client_key_id=key.id if key else None,
        client_key_name=key.name if key else "", model_requested=model if isinstance(model, str) else "",
        stream=bool(isinstance(body, dict) and body.get("stream") is True), transport=request.transport,
        user_id=key.user_id if key else None, team_id=key.team_id if key else None,
        surface=key.surface if key else "", **(hints.read(request.headers) if key else {}),
    )
    refused(gw.log, record, started, status_of(err, proto.NAME), err.error_class)


Serve = Callable[[Gateway, Exchange], Awaitable[ApiResponse]]
# What a serve function sends upstream for a body (the conversation it continues written out), when that
# is not the body itself: compaction's summary request. Limits and budgets count this, not the client's.
Outgoing = Callable[[Gateway, KeyInfo, Route, dict[str, Any]], dict[str, Any]]


def sent_upstream(gw: Gateway, body: dict[str, Any], body_bytes: int, written: dict[str, Any],
                  outgoing: dict[str, Any]) -> int:
    """The size of what goes upstream for ``body`` (``body_bytes`` as the client sent it): ``written``,
    the body with the conversation it continues written out, or ``outgoing`` made of it. Past the
    request body's limit it is refused as the body itself would have been (a follow-up of a few bytes
    could otherwise send the upstream many times the limit)."""

    if outgoing is body:
        return body_bytes
    try:
        size = len(sse.dumps(outgoing))
    except TypeError as exc:
        raise NestingTooDeep from exc
    limit = gw.options.max_body_bytes
    if size > limit:
        more = "with the conversation it continues written out" if written is not body else "as sent upstream"
        raise assembled_too_large(limit, more, size)
    return size


def assembled_too_large(limit: int, how: str, size: int) -> PayloadTooLarge:
    """The body limit's 413 (``gateway.edge.bodylimit``'s words) for a request assembled by the gateway."""

    return PayloadTooLarge(f"The request body exceeds the limit of {limit} bytes {how} ({size} bytes)")


async def api_call(gw: Gateway, request: ApiRequest, proto_name: str, allow_x_api_key: bool,
                   stateful: bool = False, serve: Serve = dispatch, outgoing: Outgoing | None = None,
                   readable: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                   fields: MessagesFields | None = None) -> ApiResponse:
    """``stateful``: the protocol keeps conversations (Responses: ``previous_response_id``, ``store``);
    ``readable``: the body as the request parser is to read it (the client's own is what is forwarded);
    ``fields``: the endpoint's own fields and answer headers (Messages').

    The request's limits and budgets count what goes upstream: the client's body with the conversation
    it continues written out (a ``previous_response_id`` of a few bytes may stand for megabytes), or
    what ``outgoing`` makes of that.
    """

    started = time.monotonic()
    proto = registry.get(proto_name)
    key: KeyInfo | None = None
    body: Any = None
    ex: Exchange | None = None
    try:
        snap = await gw.config.get()
        key = await authenticate(request, snap, allow_x_api_key, gw.config)
        await gw.limits.check_rate(key)
        body = parse_body(request)
        if stateful:
            conversation.refuse_background(body)
        previous = await conversation.previous_of(body, key, gw.conversations) if stateful else None
        ireq = parse_request(proto, body if readable is None else readable(body))
        check_allowed(key, ireq.model)  # before routing: a name the key may not use is not looked up
        route = resolve(ireq.model, snap)
        if fields is not None:
            fields.refuse(body, route, proto)
        written = body
        if previous is not None:  # the conversation as the routed provider may be sent it
            written = previous.expanded(body, route.provider.id)
            ireq = parse_request(proto, written)
        upstream = outgoing(gw, key, route, written) if outgoing is not None else written
        upstream_bytes = sent_upstream(gw, body, len(request.body), written, upstream)
        ex = Exchange(new_id("req_"), proto, key, body, ireq, route, request.headers,
                      request.query, previous, stateful and conversation.keeps(body), started=started,
                      session=session_of(proto.NAME, request.headers, body, key.id,
                                         previous.entries[0].response_id if previous is not None else None))
        ex.sent = (upstream, upstream_bytes)
        prices = route.provider.prices
        ex.record.transport = request.transport
        if fields is not None:
            ex.record.billing_group = fields.billing_group(body, gw.options.billing_group_tag)
        estimate = request_estimate(
            proto.NAME, upstream, ireq if upstream is written else parse_request(proto, upstream), upstream_bytes,
            gw.options.reserve_output_tokens, prices, route.upstream_model)
        ex.hold = await gw.limits.admit(key, ex.request_id, estimate, prices)
        ex.record.request_body = gw.log.keep_body(request.body)
        standings = ex.hold.standings
        response = await serve(gw, ex)
        if fields is not None:
            fields.answer(response, standings)
        return response
    except (GatewayError, DatabaseUnavailable) as exc:
        err = exc if isinstance(exc, GatewayError) else unavailable(exc)
        if ex is not None:
            finish(gw.log, ex, status_of(err, proto.NAME), err.error_class)
        elif key is not None or isinstance(err, AuthenticationFailed):
            refused_key = err.refused_key if isinstance(err, AuthenticationFailed) else None
            _log_rejected(gw, proto, key or refused_key, body, err, request, started)
        return error_response(proto.NAME, err)
    except asyncio.CancelledError:
        # The client hung up (or the gateway is stopping) before the answer: the request keeps its row.
        if ex is not None:
            finish(gw.log, ex, 499, ErrorClass.CLIENT_DISCONNECTED)
        raise
    except Exception:
        log.exception("unexpected failure serving %s", request.path)
        if ex is not None:
            finish(gw.log, ex, 500, ErrorClass.INTERNAL)
        return error_response(proto.NAME, GatewayError("The gateway failed to serve this request; it has been logged"))


async def chat_completions(gw: Gateway, request: ApiRequest) -> ApiResponse:
    return await api_call(gw, request, "openai_chat", allow_x_api_key=False)


async def messages(gw: Gateway, request: ApiRequest) -> ApiResponse:
    return await api_call(gw, request, "anthropic", allow_x_api_key=True, fields=MESSAGES)


async def responses(gw: Gateway, request: ApiRequest) -> ApiResponse:
    return await api_call(gw, request, "responses", allow_x_api_key=False, stateful=True,
                          serve=_serve_responses, outgoing=_responses_outgoing)


async def responses_compact(gw: Gateway, request: ApiRequest) -> ApiResponse:
    return await api_call(gw, request, "responses", allow_x_api_key=False, stateful=True, serve=_serve_compact,
                          outgoing=_compact_outgoing, readable=compaction.by_reference)


def _gateway_compacts(route: Route) -> bool:
    return registry.get(route.provider.protocol).COMPACT_PATH is None  # a Responses upstream compacts for itself


def _responses_outgoing(gw: Gateway, key: KeyInfo, route: Route, written: dict[str, Any]) -> dict[str, Any]:
    if _gateway_compacts(route) and compaction.wants_compaction(written):
        return compaction.summary_request(written, gw.sealer, key.id)
    return written


def _compact_outgoing(gw: Gateway, key: KeyInfo, route: Route, written: dict[str, Any]) -> dict[str, Any]:
    return compaction.summary_request(written, gw.sealer, key.id) if _gateway_compacts(route) else written


def _written_out(ex: Exchange) -> dict[str, Any]:
    """The client's body with the conversation ``previous_response_id`` names written out, for an
    upstream that does not keep conversations (the sealed compaction items in it are opened later)."""

    return ex.previous.expanded(ex.body, ex.route.provider.id) if ex.previous is not None else ex.body


async def _serve_responses(gw: Gateway, ex: Exchange) -> ApiResponse:
    """A Responses upstream reads compaction items and triggers itself; for any other the gateway
    answers the trigger and opens the items it sealed (``gateway.endpoints.compaction``)."""

    if ex.passthrough:
        return await dispatch(gw, ex)
    if compaction.wants_compaction(ex.body):
        item, usage = await compaction.summarise(gw, ex, parse_request, _written_out(ex))
        return compaction.trigger_answer(ex, item, usage)
    expanded = compaction.expand(_written_out(ex), gw.sealer, ex.key.id)
    if expanded is not None:
        ex.request = parse_request(ex.client, expanded)
    return await dispatch(gw, ex)


async def _serve_compact(gw: Gateway, ex: Exchange) -> ApiResponse:
    if ex.passthrough:
        ex.upstream_path = ex.client.COMPACT_PATH
        return await dispatch(gw, ex)
    history = _written_out(ex)
    item, usage = await compaction.summarise(gw, ex, parse_request, history)
    return json_response(compaction.compacted(history, item, usage))


async def count_tokens(gw: Gateway, request: ApiRequest) -> ApiResponse:
    try:
        snap = await gw.config.get()
        key = await authenticate(request, snap, True, gw.config)
        await gw.limits.check_rate(key)
        return await count_input_tokens(gw, parse_body(request), key, snap, request.headers, request.query)
    except GatewayError as err:
        return error_response("anthropic", err)


async def models(gw: Gateway, request: ApiRequest) -> ApiResponse:
    """The models this key can use, in the caller's shape (``gateway.endpoints.model_shapes``)."""

    anthropic = model_shapes.wants_anthropic(request)
    try:
        snap = await gw.config.get()
        key = await authenticate(request, snap, True, gw.config)
        entries = await gw.models.entries(snap, lambda model: may_use(key, model))
        if anthropic:
            return json_response(model_shapes.anthropic_page(entries, request.params))
        if model_shapes.wants_codex(request.params):
            return json_response(model_shapes.codex_catalog(entries))
        return json_response(model_shapes.openai_list(entries))
    except GatewayError as err:
        return error_response("anthropic" if anthropic else "openai_chat", err)


async def model(gw: Gateway, request: ApiRequest, model_id: str) -> ApiResponse:
    """One model this key can use, in the caller's shape; 404 for one it cannot or the gateway does not route."""

    anthropic = model_shapes.wants_anthropic(request)
    try:
        snap = await gw.config.get()
        key = await authenticate(request, snap, True, gw.config)
        entry = entry_for(model_id, snap) if may_use(key, model_id) else None
        if entry is None:
            raise ModelNotFound(f"The model '{shown(model_id)}' does not exist or is not available to this key",
                                param="model")
        return json_response(model_shapes.anthropic_model(entry) if anthropic else model_shapes.openai_model(entry))
    except GatewayError as err:
        return error_response("anthropic" if anthropic else "openai_chat", err)


async def metrics(gw: Gateway, request: ApiRequest) -> ApiResponse:
    """The Prometheus scrape (``gateway.log.metrics``): 404 while no token is set, 401 without it."""

    token = gw.options.metrics_token
    if not token:
        return text_response(b"Not found\n", 404)
    scheme, _, sent = request.header("authorization").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(sent.strip().encode(), token.encode()):
        return text_response(b"Unauthorized\n", 401, headers={"WWW-Authenticate": 'Bearer realm="metrics"'})
    try:
        body = await hop(gw.metrics.exposition, gw.metrics_collectors)
    except DatabaseUnavailable:
        body = gw.metrics.exposition()  # this process's figures still; the accounts wait for the database
    return text_response(body, content_type=CONTENT_TYPE_LATEST)


async def healthz(gw: Gateway, request: ApiRequest) -> ApiResponse:
    return json_response({"status": "ok"})


def _db_ok() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        row: tuple[object, ...] | None = cursor.fetchone()
        return row == (1,)


READY_TIMEOUT = 2.0  # a load balancer's probe must get its answer, not wait on a database that hangs


async def readyz(gw: Gateway, request: ApiRequest) -> ApiResponse:
    try:
        async with asyncio.timeout(READY_TIMEOUT):
            ok = await hop(_db_ok)
    except Exception as exc:  # noqa: BLE001 - any database failure means not ready
        return json_response({"status": "unavailable", "database": type(exc).__name__}, 503)
    return json_response({"status": "ok" if ok else "unavailable"}, 200 if ok else 503)
