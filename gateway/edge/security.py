"""Security headers on every HTML page (admin, dashboard, login), set in one place.

Django's own middleware already sends ``X-Frame-Options`` and
``X-Content-Type-Options``; this adds the Content-Security-Policy it lacks and
pins the others, so no HTML page goes out without them. A page that sets its
own value (the dashboard's stricter headers) keeps it. The API's JSON and SSE
responses are not pages: they get ``X-Content-Type-Options`` where the gateway
writes them (``gateway.edge.responses.NOSNIFF``), and no CSP or frame headers.

Behind TLS (``GATEWAY_BEHIND_TLS``, see the settings) Django's SecurityMiddleware
also redirects plain-HTTP page requests to HTTPS and sends HSTS on pages; API
paths never pass that middleware, so they are never redirected (README,
"Production").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponseBase
from django.utils.decorators import sync_and_async_middleware

# Everything from this origin only (the admin and dashboard load no inline script or style).
CSP = ("default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'self'; "
       "form-action 'self'; frame-ancestors 'none'")
PAGE_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def add_page_headers(response: HttpResponseBase) -> HttpResponseBase:
    if response.get("Content-Type", "").startswith("text/html"):
        for name, value in PAGE_HEADERS.items():
            if name not in response:
                response[name] = value
    return response


@sync_and_async_middleware
def security_headers(get_response: Callable[[HttpRequest], Any]) -> Callable[[HttpRequest], Any]:
    if iscoroutinefunction(get_response):
        async def async_middleware(request: HttpRequest) -> HttpResponseBase:
            return add_page_headers(await get_response(request))

        return async_middleware

    def middleware(request: HttpRequest) -> HttpResponseBase:
        return add_page_headers(get_response(request))

    return middleware

