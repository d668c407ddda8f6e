"""Claude Code's sign-in endpoints as API routes (``signin.views``): discovery (RFC 8414), device
authorization (RFC 8628), token and revocation (RFC 7009). Machine endpoints, so no page machinery:
no session, no CSRF (the client sends none); each runs on a worker thread for its database work."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseBase

from accounts.db import DatabaseUnavailable, hop
from signin import views

from ..app import Gateway
from ..edge.responses import json_response


async def _served(view: object, request: HttpRequest) -> HttpResponseBase:
    try:
        response: HttpResponse = await hop(view, request)  # type: ignore[arg-type]
        return response
    except DatabaseUnavailable:
        return json_response({"error": "temporarily_unavailable",
                              "error_description": "The gateway's database cannot be reached; try again"}, 503)


async def metadata(gw: Gateway, request: HttpRequest) -> HttpResponseBase:
    return views.metadata(request)


async def device_authorization(gw: Gateway, request: HttpRequest) -> HttpResponseBase:
    return await _served(views.device_authorization, request)


async def token(gw: Gateway, request: HttpRequest) -> HttpResponseBase:
    return await _served(views.token, request)


async def revoke(gw: Gateway, request: HttpRequest) -> HttpResponseBase:
    return await _served(views.revoke, request)
