"""``POST /v1/metrics``, ``/v1/logs``, ``/v1/traces``: the OTLP/HTTP exports Claude Code sends its
gateway (protobuf or JSON), for a client key or a signed-in developer's bearer.

Always 200 once the caller is known (Claude Code's exporter logs an error on every flush
otherwise): what is read is kept (``telemetry.store``, per client key and hour), what is not
(a body that is no OTLP, an export past ``GATEWAY_TELEMETRY_PER_MINUTE`` a minute for the key) is
dropped and counted in the process log. A body over ``GATEWAY_TELEMETRY_MAX_BYTES`` is a 413. With
``GATEWAY_OTLP_FORWARD_URL`` every accepted export also goes, as it came, to that collector.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from django.utils import timezone

from accounts.db import DatabaseUnavailable, hop

from ..edge.request import ApiRequest
from ..edge.responses import ApiResponse, error_response
from ..errors import GatewayError, PayloadTooLarge, unavailable
from .auth import authenticate

if TYPE_CHECKING:
    from ..app import Gateway

log = logging.getLogger(__name__)
ENVELOPE = "anthropic"
# The answer an OTLP/HTTP exporter expects: an empty Export*ServiceResponse (no partial rejection).
EMPTY = {"application/json": b"{}", "application/x-protobuf": b""}


async def export(gw: Gateway, request: ApiRequest, signal: str) -> ApiResponse:
    from telemetry import otlp, store

    try:
        snap = await gw.config.get()
        key = await authenticate(request, snap, True, gw.config)
        body = request.body
        if len(body) > gw.options.telemetry_max_bytes:
            raise PayloadTooLarge(f"The {signal} export exceeds the limit of {gw.options.telemetry_max_bytes} bytes")
        content_type = request.header("content-type") or "application/x-protobuf"
        json = content_type.split(";")[0].strip().lower() == "application/json"
        answer = ApiResponse(200, EMPTY["application/json" if json else "application/x-protobuf"],
                              content_type="application/json" if json else "application/x-protobuf")
        if await gw.limits.hits(f"otlp:{key.id}:{key.name}", 60) > gw.options.telemetry_per_minute:
            log.warning("telemetry from key %s past %s exports a minute: dropped", key.name,
                        gw.options.telemetry_per_minute)
            return answer
        try:
            figures = otlp.figures(signal, otlp.decode(signal, body, content_type))
        except otlp.Unreadable as exc:
            log.warning("telemetry from key %s dropped: %s", key.name, exc)
            return answer
        await hop(store.record, key.id, figures, timezone.now())
        gw.otlp.send(signal, body, content_type)
        return answer
    except GatewayError as err:
        return error_response(ENVELOPE, err)
    except DatabaseUnavailable as exc:
        return error_response(ENVELOPE, unavailable(exc))


async def metrics(gw: Gateway, request: ApiRequest) -> ApiResponse:
    return await export(gw, request, "metrics")


async def logs(gw: Gateway, request: ApiRequest) -> ApiResponse:
    return await export(gw, request, "logs")


async def traces(gw: Gateway, request: ApiRequest) -> ApiResponse:
    return await export(gw, request, "traces")
