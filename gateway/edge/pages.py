"""The gateway's one page of its own: ``/``."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect


async def root(request: HttpRequest) -> HttpResponse:
    """``HEAD /`` is Claude Code's connection probe: 200. A person opening ``/`` goes to the dashboard."""

    if request.method == "HEAD":
        return HttpResponse(status=200)
    return HttpResponseRedirect("/dashboard/")
