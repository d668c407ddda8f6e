"""Claude Code's sign-in endpoints as API routes (``signin.oauth``): discovery (RFC 8414), device
authorization (RFC 8628), token and revocation (RFC 7009). Machine endpoints, so no page machinery:
no session, no CSRF (the client sends none); the form is read here, the database work runs on a
worker thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from accounts.db import DatabaseUnavailable, hop
from signin import oauth

from ..app import Gateway
from ..edge.request import ApiRequest
from ..edge.responses import ApiResponse, json_response


def public_base(request: ApiRequest) -> str:
    """The base URL clients reach the gateway at: ``GATEWAY_PUBLIC_URL``, else the request's own scheme
    and host — a host the settings allow (``ALLOWED_HOSTS``), so a forged Host header never names
    the endpoints the client is sent to."""

    configured = getattr(settings, "GATEWAY_PUBLIC_URL", "")
    if configured:
        return str(configured).rstrip("/")
    host = request.header("host") or "localhost"
    domain, _ = split_domain_port(host)
    allowed = list(settings.ALLOWED_HOSTS) or (["localhost", "127.0.0.1", "[::1]"] if settings.DEBUG else [])
    if not domain or not validate_host(domain, allowed):
        host = "localhost"
    scheme = request.scheme
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        name, value = proxy
        if request.header(name.removeprefix("HTTP_").replace("_", "-").lower()) == value:
            scheme = "https"
    return f"{scheme}://{host}"


def _form(request: ApiRequest) -> dict[str, str]:
    return dict(parse_qsl(request.body.decode("utf-8", "replace"), keep_blank_values=True))


def _answered(answer: oauth.Answer) -> ApiResponse:
    status, body = answer
    if body is None:
        return ApiResponse(status, content_type=None, headers=oauth.NO_STORE)
    return json_response(body, status, dict(oauth.NO_STORE))


async def _served(work: Callable[..., oauth.Answer], *args: Any) -> ApiResponse:
    try:
        return _answered(await hop(work, *args))
    except DatabaseUnavailable:
        return json_response({"error": "temporarily_unavailable",
                              "error_description": "The gateway's database cannot be reached; try again"}, 503)


async def metadata(gw: Gateway, request: ApiRequest) -> ApiResponse:
    return json_response(oauth.metadata(public_base(request)))


async def device_authorization(gw: Gateway, request: ApiRequest) -> ApiResponse:
    return await _served(oauth.device_authorization, _form(request), request.header("user-agent"),
                         public_base(request))


async def token(gw: Gateway, request: ApiRequest) -> ApiResponse:
    return await _served(oauth.token, _form(request))


async def revoke(gw: Gateway, request: ApiRequest) -> ApiResponse:
    return await _served(oauth.revoke, _form(request))
