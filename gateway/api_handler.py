"""Django's ASGI handler for the API paths, without the HTML middleware stack.

Django runs every ``MiddlewareMixin`` middleware's ``process_request`` and
``process_response`` through ``sync_to_async(thread_sensitive=True)`` under
ASGI: one shared worker thread, several round trips per request. The API needs
none of sessions, CSRF, auth, messages or clickjacking headers, so its requests
go through this handler, whose only middleware is CORS. URL routing, views and
exception handling are Django's own.
"""

from __future__ import annotations

from typing import Any

from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response

from .middleware import CorsMiddleware

API_PREFIXES = ("/v1/", "/healthz", "/readyz")


class ApiASGIHandler(ASGIHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware: list[Any] = []
        self._template_response_middleware: list[Any] = []
        self._exception_middleware: list[Any] = []
        handler = convert_exception_to_response(self._get_response_async)
        self._middleware_chain = convert_exception_to_response(CorsMiddleware(handler))


class SplitByPath:
    """API paths to the lean handler, everything else (admin, dashboard, static) to Django's full stack."""

    def __init__(self, api: Any, full: Any) -> None:
        self.api = api
        self.full = full

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        app = self.api if scope["path"].startswith(API_PREFIXES) else self.full
        await app(scope, receive, send)
