"""The sign-in's pages for people: the verification page ``/device``, its password login
``/device/login``, and, with an identity provider configured, ``/oidc/login`` and ``/oidc/callback``.
The OAuth endpoints the client calls are in :mod:`signin.oauth` (served as API routes).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from . import codes, flow, oidc



def public_base(request: HttpRequest) -> str:
    """The base URL clients and browsers reach the gateway at: ``GATEWAY_PUBLIC_URL``, else this request's."""

    configured = getattr(settings, "GATEWAY_PUBLIC_URL", "")
    return str(configured or request.build_absolute_uri("/")).rstrip("/")


# ------------------------------------------------------------------ pages for people


def client_ip(request: HttpRequest) -> str:
    return str(request.META.get("REMOTE_ADDR") or "0.0.0.0")


def _page(request: HttpRequest, template: str, context: dict[str, Any], status: int = 200) -> HttpResponse:
    resp = render(request, template, {"oidc": oidc.configured(), "oidc_name": oidc.provider_name(), **context},
                  status=status)
    resp["Cache-Control"] = "no-store"
    return resp


@never_cache
@login_required(login_url="signin:login")
def device(request: HttpRequest) -> HttpResponse:
    """The verification page: a code typed (or pre-filled from the link, never sent by itself), then
    a confirmation naming the client and the account, then approve or deny."""

    if request.method == "GET":
        return _page(request, "signin/device.html", {"code": request.GET.get("user_code", "")[:20]})
    if request.method != "POST":
        return HttpResponse(status=405)
    ip = client_ip(request)
    typed = request.POST.get("user_code", "")[:20]
    if flow.over_attempt_limit(ip):
        return _page(request, "signin/device.html", {"code": typed, "error": (
            "Too many codes that matched nothing were entered from your address. Wait a few minutes, "
            "then try again.")}, status=429)
    auth = flow.pending(typed, ip)
    if auth is None:
        return _page(request, "signin/device.html", {"code": typed, "error": (
            "That code matches no sign-in waiting for approval: check it, or start the sign-in again "
            "in your client (codes expire after a few minutes).")}, status=400)
    decision = request.POST.get("decision", "")
    if decision not in ("approve", "deny"):
        return _page(request, "signin/confirm.html", {"auth": auth, "code": codes.shown_user_code(auth.user_code)})
    approved = decision == "approve"
    if not flow.decide(auth, request.user, approved):
        return _page(request, "signin/device.html", {"code": typed, "error": "This sign-in was already decided."},
                     status=409)
    return _page(request, "signin/done.html", {"approved": approved, "auth": auth})


class PasswordLogin(LoginView):
    """Django's own login, for every active user (the admin's refuses developers who are not staff)."""

    template_name = "signin/login.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "oidc": oidc.configured(), "oidc_name": oidc.provider_name()}


def _next(request: HttpRequest, value: str) -> str:
    allowed = url_has_allowed_host_and_scheme(value, allowed_hosts={request.get_host()},
                                             require_https=request.is_secure())
    return value if value and allowed else reverse("signin:device")


@require_GET
def oidc_login(request: HttpRequest) -> HttpResponse:
    if not oidc.configured():
        return HttpResponseRedirect(reverse("signin:login"))
    request.session["signin_next"] = _next(request, request.GET.get("next", ""))
    redirect_uri = public_base(request) + reverse("signin:oidc_callback")
    response: HttpResponse = oidc.client().authorize_redirect(request, redirect_uri)
    return response


@require_GET
def oidc_callback(request: HttpRequest) -> HttpResponse:
    from authlib.integrations.base_client import OAuthError as ClientError

    if not oidc.configured():
        return HttpResponseRedirect(reverse("signin:login"))
    try:
        tokens = oidc.client().authorize_access_token(request)
    except ClientError as exc:
        return _page(request, "signin/login_failed.html", {"reason": exc.description or exc.error}, status=400)
    claims = dict(tokens.get("userinfo") or {})
    if not claims.get("sub"):
        return _page(request, "signin/login_failed.html", {"reason": "The identity provider sent no ID token"},
                     status=400)
    user = oidc.developer(claims)
    if user is None:
        return _page(request, "signin/login_failed.html", {"reason": "This account is deactivated"}, status=403)
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    return HttpResponseRedirect(_next(request, request.session.pop("signin_next", "")))
