"""CORS for the API, once for every endpoint (SOP: allow all origins; preflight answered 200 without auth)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse, HttpResponseBase

from .responses import CORS_HEADERS

API_PREFIX = "/v1/"


class CorsMiddleware:
    sync_capable = False
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Awaitable[HttpResponseBase]]) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    async def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if not request.path.startswith(API_PREFIX):
            return await self.get_response(request)
        if request.method == "OPTIONS":
            response: HttpResponseBase = HttpResponse(status=200)
        else:
            response = await self.get_response(request)
        for name, value in CORS_HEADERS.items():
            response[name] = value
        return response
