"""Staff-only pages with the security headers every dashboard page carries."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from inspect import iscoroutinefunction
from typing import Any

from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse

# Scripts, styles, images and the websocket from this origin only; no framing, no plugins.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

View = Callable[..., Any]  # a view returning a response, or an async one


def staff_page(view: View) -> View:
    """Login as staff required (anonymous → the admin login page), then the headers; sync or async views."""

    if iscoroutinefunction(view):
        @wraps(view)
        async def awrapped(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
            return _headed(await view(request, *args, **kwargs))

        return staff_member_required(awrapped)

    @wraps(view)
    def wrapped(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        return _headed(view(request, *args, **kwargs))

    return staff_member_required(wrapped)


def _headed(response: HttpResponse) -> HttpResponse:
    for name, value in HEADERS.items():
        response[name] = value
    return response
