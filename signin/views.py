"""The sign-in's HTTP surface. The OAuth endpoints answer JSON directly (the client follows no
redirect and sends no CSRF token): they are API routes (``gateway.edge.api``, run on a worker thread
by ``gateway.endpoints.oauth``), never pages. The verification page and the logins are pages for people.

Endpoints (RFC 8414 discovery, RFC 8628 device flow, RFC 6749 refresh, RFC 7009 revocation):
``/.well-known/oauth-authorization-server``, ``/oauth/device_authorization``, ``/oauth/token``,
``/oauth/revoke``; the verification page ``/device``, its password login ``/device/login``, and,
with an identity provider configured, ``/oidc/login`` and ``/oidc/callback``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from . import codes, flow, oidc

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


def public_base(request: HttpRequest) -> str:
    """The base URL clients and browsers reach the gateway at: ``GATEWAY_PUBLIC_URL``, else this request's."""

    configured = getattr(settings, "GATEWAY_PUBLIC_URL", "")
    return str(configured or request.build_absolute_uri("/")).rstrip("/")


def oauth_json(data: dict[str, Any], status: int = 200) -> JsonResponse:
    resp = JsonResponse(data, status=status)
    for name, value in NO_STORE.items():
        resp[name] = value
    return resp


def oauth_error(err: flow.OAuthError) -> JsonResponse:
    body = {"error": err.error}
    if err.description:
        body["error_description"] = err.description
    return oauth_json(body, err.status)


def metadata(request: HttpRequest) -> JsonResponse:
    """RFC 8414 authorization server metadata. No ``authorization_endpoint``: the device flow is the only way in."""

    base = public_base(request)
    return JsonResponse({
        "issuer": base,
        "device_authorization_endpoint": f"{base}/oauth/device_authorization",
        "token_endpoint": f"{base}/oauth/token",
        "revocation_endpoint": f"{base}/oauth/revoke",
        "grant_types_supported": [DEVICE_GRANT, "refresh_token"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
    })


def device_authorization(request: HttpRequest) -> JsonResponse:
    """RFC 8628 §3.1–3.2. Only ``surface`` is read; ``client_id``, ``scope`` and anything else are ignored."""

    started = flow.start(request.POST.get("surface", ""), request.headers.get("User-Agent", ""))
    base = public_base(request)
    shown = codes.shown_user_code(started.user_code)
    body: dict[str, Any] = {
        "device_code": started.device_code, "user_code": shown,
        "verification_uri": f"{base}/device", "verification_uri_complete": f"{base}/device?user_code={shown}",
        "expires_in": started.expires_in, "interval": started.interval,
    }
    notice = getattr(settings, "GATEWAY_SIGNIN_LOGIN_NOTICE", "")
    if notice:
        body["login_notice"] = notice[:500]
    return oauth_json(body)


def token(request: HttpRequest) -> JsonResponse:
    grant = request.POST.get("grant_type", "")
    try:
        if grant == DEVICE_GRANT:
            device_code = request.POST.get("device_code", "")
            if not device_code:
                raise flow.OAuthError("invalid_request", "device_code is missing")
            issued = flow.poll(device_code)
        elif grant == "refresh_token":
            refresh_token = request.POST.get("refresh_token", "")
            if not refresh_token:
                raise flow.OAuthError("invalid_request", "refresh_token is missing")
            issued = flow.refresh(refresh_token)
        else:
            raise flow.OAuthError("unsupported_grant_type",
                                  f"grant_type must be {DEVICE_GRANT} or refresh_token")
    except flow.OAuthError as err:
        return oauth_error(err)
    body: dict[str, Any] = {"access_token": issued.access_token, "token_type": "Bearer",
                            "expires_in": issued.expires_in, "refresh_token": issued.refresh_token}
    if issued.email:
        body["email"] = issued.email
    return oauth_json(body)


def revoke(request: HttpRequest) -> HttpResponse:
    """RFC 7009: 200 whether or not the token was known; the hint is not needed (both kinds are found)."""

    token_value = request.POST.get("token", "")
    if not token_value:
        return oauth_error(flow.OAuthError("invalid_request", "token is missing"))
    flow.revoke(token_value)
    resp = HttpResponse(status=200)
    for name, value in NO_STORE.items():
        resp[name] = value
    return resp


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
