"""The API surface. Views are thin: each step is a named function elsewhere."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.views.decorators.csrf import csrf_exempt

from translation import ir, registry, sse
from translation.ids import new_id
from translation.protocol import ProtocolModule

from . import reqlog
from .auth import authenticate
from .count_tokens import count_input_tokens
from .dispatch import Exchange, dispatch
from .errors import GatewayError, InvalidRequest, NestingTooDeep, UpstreamFailed, render, status_of
from .models_list import list_models
from .ratelimit import limits
from .responses import json_response, raw_json_response
from .routing import check_allowed, resolve
from .state import KeyInfo, config

log = logging.getLogger(__name__)


def parse_body(request: HttpRequest) -> Any:
    raw = request.body
    if not raw.strip():
        raise InvalidRequest("The request body is empty; send a JSON object")
    try:
        body = sse.loads(raw)
    except ValueError as exc:
        raise InvalidRequest(f"The request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object")
    # orjson reads 1024 levels of nesting but writes only 254, and fields the upstream never sees are
    # still echoed into answers (a Responses text.format schema): too deep, it broke the answer midway.
    # Only a body with more brackets than that can be too deep, so nearly every body costs a count.
    if raw.count(b"[") + raw.count(b"{") > 254:
        try:
            sse.dumps(body)
        except TypeError as exc:
            raise NestingTooDeep from exc
    return body


def parse_request(proto: ProtocolModule, body: Any) -> ir.Request:
    try:
        return proto.parse_request(body)
    except ir.InvalidRequest as exc:
        raise InvalidRequest(exc.message, exc.param) from exc


def error_response(proto: ProtocolModule, err: GatewayError) -> HttpResponse:
    if isinstance(err, UpstreamFailed) and err.raw is not None:
        return raw_json_response(err.raw, status_of(err), err.headers)  # same protocol: as the upstream sent it
    return json_response(render(proto, err), status_of(err), err.headers)


def _log_rejected(proto: ProtocolModule, key: KeyInfo, body: Any, err: GatewayError) -> None:
    model = body.get("model") if isinstance(body, dict) else None
    reqlog.submit(reqlog.LogRecord(
        request_id=new_id("req_"), client_protocol=proto.NAME, client_key_id=key.id,
        client_key_name=key.name, model_requested=model if isinstance(model, str) else "",
        stream=bool(isinstance(body, dict) and body.get("stream") is True),
        status=status_of(err), error_class=err.error_class,
    ))


async def api_call(request: HttpRequest, proto_name: str, allow_x_api_key: bool) -> HttpResponse:
    proto = registry.get(proto_name)
    key: KeyInfo | None = None
    body: Any = None
    ex: Exchange | None = None
    try:
        snap = await config.get()
        key = await authenticate(request, snap, allow_x_api_key)
        await limits.check(key)
        body = parse_body(request)
        ireq = parse_request(proto, body)
        route = resolve(ireq.model, snap)
        check_allowed(key, ireq.model)
        ex = Exchange(new_id("req_"), proto, key, body, ireq, route, request.headers,
                      request.META.get("QUERY_STRING", ""))
        ex.record.request_body = reqlog.capped(request.body)
        return await dispatch(ex, settings.GATEWAY_MAX_ATTEMPTS, settings.GATEWAY_KEEPALIVE_SECONDS)
    except GatewayError as err:
        if ex is not None:
            ex.record.status, ex.record.error_class = status_of(err), err.error_class
            ex.record.latency_ms = ex.elapsed_ms()
            reqlog.submit(ex.record)
        elif key is not None:
            _log_rejected(proto, key, body, err)
        return error_response(proto, err)
    except asyncio.CancelledError:
        # The client hung up (or the gateway is stopping) before the answer: the request keeps its row.
        if ex is not None:
            ex.record.status, ex.record.error_class = 499, "cancelled"
            ex.record.latency_ms = ex.elapsed_ms()
            reqlog.submit(ex.record)
        raise
    except Exception:
        log.exception("unexpected failure serving %s", request.path)
        err = GatewayError("The gateway failed to serve this request; it has been logged")
        if ex is not None:
            ex.record.status, ex.record.error_class = 500, "internal_error"
            reqlog.submit(ex.record)
        return error_response(proto, err)


@csrf_exempt
async def chat_completions(request: HttpRequest) -> HttpResponse:
    return await api_call(request, "openai_chat", allow_x_api_key=False)


@csrf_exempt
async def messages(request: HttpRequest) -> HttpResponse:
    return await api_call(request, "anthropic", allow_x_api_key=True)


@csrf_exempt
async def responses(request: HttpRequest) -> HttpResponse:
    return await api_call(request, "responses", allow_x_api_key=False)


@csrf_exempt
async def count_tokens(request: HttpRequest) -> HttpResponse:
    proto = registry.get("anthropic")
    try:
        snap = await config.get()
        key = await authenticate(request, snap, allow_x_api_key=True)
        return await count_input_tokens(parse_body(request), key, snap, request.headers,
                                        request.META.get("QUERY_STRING", ""))
    except GatewayError as err:
        return error_response(proto, err)
    except Exception:
        log.exception("unexpected failure serving %s", request.path)
        return error_response(proto, GatewayError("The gateway failed to serve this request; it has been logged"))


async def models(request: HttpRequest) -> HttpResponse:
    proto = registry.get("openai_chat")
    try:
        snap = await config.get()
        await authenticate(request, snap, allow_x_api_key=True)
        return json_response(await list_models(snap))
    except GatewayError as err:
        return error_response(proto, err)


async def root(request: HttpRequest) -> HttpResponse:
    """``HEAD /`` is Claude Code's connection probe: 200. A person opening ``/`` goes to the dashboard."""

    if request.method == "HEAD":
        return HttpResponse(status=200)
    return HttpResponseRedirect("/dashboard/")


async def healthz(request: HttpRequest) -> HttpResponse:
    return json_response({"status": "ok"})


def _db_ok() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        return cursor.fetchone() == (1,)


async def readyz(request: HttpRequest) -> HttpResponse:
    try:
        ok = await sync_to_async(_db_ok, thread_sensitive=False)()
    except Exception as exc:  # noqa: BLE001 - any database failure means not ready
        return json_response({"status": "unavailable", "database": type(exc).__name__}, 503)
    return json_response({"status": "ok" if ok else "unavailable"}, 200 if ok else 503)
