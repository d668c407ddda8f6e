"""Static files through WhiteNoise without a thread hop on every API request.

WhiteNoise's middleware is synchronous only, so placing it in the stack makes
Django adapt every request to async views through a worker thread and back.
This wrapper is async-native and consults WhiteNoise only for ``STATIC_URL``
paths (a dictionary lookup, no I/O).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFilesMiddleware:
    sync_capable = False
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Awaitable[HttpResponseBase]]) -> None:
        self.get_response = get_response
        self.whitenoise = WhiteNoiseMiddleware(get_response=None)
        self.prefix = settings.STATIC_URL if settings.STATIC_URL.startswith("/") else "/" + settings.STATIC_URL
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    async def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if request.path_info.startswith(self.prefix):
            # WhiteNoiseMiddleware.__call__ without its get_response (it has no process_request).
            wn = self.whitenoise
            static_file = wn.find_file(request.path_info) if wn.autorefresh else wn.files.get(request.path_info)
            if static_file is not None:
                response: HttpResponseBase = wn.serve(static_file, request)  # WhiteNoiseFileResponse
                return response
        return await self.get_response(request)
