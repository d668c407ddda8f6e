"""Signing in on the verification page through the company's OpenID Connect identity provider
(Authlib's Django client: discovery, the authorization code flow with PKCE and a nonce, the ID
token's RS256 signature checked against the provider's JWKS).

Configured by ``GATEWAY_OIDC_ISSUER``, ``GATEWAY_OIDC_CLIENT_ID`` and ``GATEWAY_OIDC_CLIENT_SECRET``;
without them the page offers the password login only. A developer is found by the provider's
``(issuer, sub)``, else by a user with the same e-mail address (the first time), else created.
The provider's groups (``GATEWAY_OIDC_GROUPS_CLAIM``, ``groups``) pick the developer's team: the
first active team, by name, whose ``idp_group`` is among them; none, no team. A token without the
claim leaves the team as ops set it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from accounts.models import Team

from . import flow
from .models import Identity


def configured() -> bool:
    return bool(getattr(settings, "GATEWAY_OIDC_ISSUER", "") and getattr(settings, "GATEWAY_OIDC_CLIENT_ID", ""))


def provider_name() -> str:
    return str(getattr(settings, "GATEWAY_OIDC_NAME", "") or "your company's sign-in")


@lru_cache(maxsize=4)
def _client(issuer: str, client_id: str, client_secret: str, scope: str) -> Any:
    from authlib.integrations.django_client import OAuth

    oauth = OAuth()
    return oauth.register(
        "idp", client_id=client_id, client_secret=client_secret or None,
        server_metadata_url=issuer.rstrip("/") + "/.well-known/openid-configuration",
        client_kwargs={"scope": scope, "code_challenge_method": "S256"})


def client() -> Any:
    return _client(settings.GATEWAY_OIDC_ISSUER, settings.GATEWAY_OIDC_CLIENT_ID,
                   getattr(settings, "GATEWAY_OIDC_CLIENT_SECRET", ""),
                   getattr(settings, "GATEWAY_OIDC_SCOPES", "openid email profile"))


def _username(claims: dict[str, Any]) -> str:
    User = get_user_model()
    base = str(claims.get("preferred_username") or claims.get("email") or claims["sub"])[:140]
    name, n = base, 1
    while User.objects.filter(username=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def developer(claims: dict[str, Any]) -> Any:
    """The Django user the provider's verified claims stand for, made or updated, with the team their
    groups give them. None when the account is deactivated (ops' word wins over the provider's)."""

    User = get_user_model()
    issuer, subject = str(claims["iss"]), str(claims["sub"])
    email = str(claims.get("email") or "")
    with transaction.atomic():
        link = Identity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
        user = link.user if link is not None else None
        if user is None and email and claims.get("email_verified", True):
            same = list(User.objects.filter(email__iexact=email)[:2])
            user = same[0] if len(same) == 1 else None
        if user is None:
            user = User.objects.create_user(username=_username(claims), email=email)
            user.set_unusable_password()
            user.save()
        if link is None:
            Identity.objects.create(user=user, issuer=issuer, subject=subject)
        if email and user.email != email:
            user.email = email
            user.save(update_fields=["email"])
        if not user.is_active:
            return None
        claim = getattr(settings, "GATEWAY_OIDC_GROUPS_CLAIM", "groups")
        if claim in claims:
            groups = claims[claim]
            groups = [str(g) for g in groups] if isinstance(groups, list) else [str(groups)]
            team = (Team.objects.filter(idp_group__in=groups, active=True).exclude(idp_group="")
                    .order_by("name").first())
            key = flow.own_key(user)
            if key.team_id != (team.pk if team else None):
                key.team = team
                key.save(update_fields=["team"])
    return user
