"""The OAuth endpoints Claude Code calls, free of any web framework: each takes the form it was
sent (and what else it needs) and returns the status and JSON to answer. The gateway serves them
as API routes (``gateway.endpoints.oauth``): machine endpoints, no session, no CSRF (the client
sends none), answered directly (the client follows no redirect).

RFC 8414 discovery, RFC 8628 device authorization, the token endpoint (device grant and RFC 6749
refresh), RFC 7009 revocation. Synchronous: they read and write the database.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from . import codes, flow

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}

Answer = tuple[int, dict[str, Any] | None]  # status, JSON body (None: an empty body)


def metadata(base: str) -> dict[str, Any]:
    """RFC 8414 authorization server metadata. No ``authorization_endpoint``: the device flow is the only way in."""

    return {
        "issuer": base,
        "device_authorization_endpoint": f"{base}/oauth/device_authorization",
        "token_endpoint": f"{base}/oauth/token",
        "revocation_endpoint": f"{base}/oauth/revoke",
        "grant_types_supported": [DEVICE_GRANT, "refresh_token"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
    }


def _error(err: flow.OAuthError) -> Answer:
    body = {"error": err.error}
    if err.description:
        body["error_description"] = err.description
    return err.status, body


def device_authorization(form: Mapping[str, str], user_agent: str, base: str) -> Answer:
    """RFC 8628 §3.1–3.2. Only ``surface`` is read; ``client_id``, ``scope`` and anything else are ignored."""

    started = flow.start(form.get("surface", ""), user_agent)
    shown = codes.shown_user_code(started.user_code)
    body: dict[str, Any] = {
        "device_code": started.device_code, "user_code": shown,
        "verification_uri": f"{base}/device", "verification_uri_complete": f"{base}/device?user_code={shown}",
        "expires_in": started.expires_in, "interval": started.interval,
    }
    notice = getattr(settings, "GATEWAY_SIGNIN_LOGIN_NOTICE", "")
    if notice:
        body["login_notice"] = notice[:500]
    return 200, body


def token(form: Mapping[str, str]) -> Answer:
    grant = form.get("grant_type", "")
    try:
        if grant == DEVICE_GRANT:
            device_code = form.get("device_code", "")
            if not device_code:
                raise flow.OAuthError("invalid_request", "device_code is missing")
            issued = flow.poll(device_code)
        elif grant == "refresh_token":
            refresh_token = form.get("refresh_token", "")
            if not refresh_token:
                raise flow.OAuthError("invalid_request", "refresh_token is missing")
            issued = flow.refresh(refresh_token)
        else:
            raise flow.OAuthError("unsupported_grant_type",
                                  f"grant_type must be {DEVICE_GRANT} or refresh_token")
    except flow.OAuthError as err:
        return _error(err)
    body: dict[str, Any] = {"access_token": issued.access_token, "token_type": "Bearer",
                            "expires_in": issued.expires_in, "refresh_token": issued.refresh_token}
    if issued.email:
        body["email"] = issued.email
    return 200, body


def revoke(form: Mapping[str, str]) -> Answer:
    """RFC 7009: 200 whether or not the token was known; the hint is not needed (both kinds are found)."""

    token_value = form.get("token", "")
    if not token_value:
        return _error(flow.OAuthError("invalid_request", "token is missing"))
    flow.revoke(token_value)
    return 200, None
