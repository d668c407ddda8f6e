"""The sign-in itself, as plain functions the views call: the device flow (RFC 8628), refresh,
revocation (RFC 7009), and finding who a bearer token belongs to.

Every state change that must happen once (a device code's tokens, a refresh token's rotation) is
one conditional UPDATE or DELETE: whichever of two racing requests changes the row wins, the other
is refused, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts import configversion
from accounts.models import ApiKey
from accounts.secrets import mask, new_client_key

from . import codes, signals
from .models import DeviceAuthorization, SignIn, Token, VerificationAttempt


class OAuthError(Exception):
    """An OAuth error answer: ``{"error": ..., "error_description": ...}`` with ``status``."""

    def __init__(self, error: str, description: str = "", status: int = 400) -> None:
        super().__init__(error)
        self.error = error
        self.description = description
        self.status = status


@dataclass(frozen=True)
class Issued:
    access_token: str
    refresh_token: str
    expires_in: int
    email: str


@dataclass(frozen=True)
class Started:
    device_code: str
    user_code: str
    expires_in: int
    interval: int


def _seconds(name: str, default: int) -> int:
    return int(getattr(settings, name, default))


def access_ttl() -> int:
    return _seconds("GATEWAY_SIGNIN_ACCESS_TTL", 3600)


# ------------------------------------------------------------------ device authorization


def start(surface: str, user_agent: str) -> Started:
    """A new device authorization: the codes the client shows and polls with."""

    now = timezone.now()
    ttl = _seconds("GATEWAY_SIGNIN_DEVICE_TTL", 600)
    interval = _seconds("GATEWAY_SIGNIN_POLL_INTERVAL", 5)
    device_code = codes.new_device_code()
    prune(now)
    for _ in range(5):  # a user code pending twice would be ambiguous: draw again
        user_code = codes.new_user_code()
        if not DeviceAuthorization.objects.filter(user_code=user_code, expires_at__gt=now).exists():
            break
    DeviceAuthorization.objects.create(
        device_code_hash=codes.digest(device_code), user_code=user_code, surface=surface[:100],
        user_agent=user_agent[:200], interval=interval, created_at=now, expires_at=now + dt.timedelta(seconds=ttl))
    return Started(device_code, user_code, ttl, interval)


def poll(device_code: str) -> Issued:
    """The token endpoint's device grant: tokens once the developer approved, else the error the
    client reacts to (authorization_pending, slow_down, access_denied, expired_token)."""

    auth = DeviceAuthorization.objects.select_related("user").filter(
        device_code_hash=codes.digest(device_code)).first()
    if auth is None:
        raise OAuthError("invalid_grant", "Unknown device code")
    now = timezone.now()
    if auth.status == DeviceAuthorization.USED:
        raise OAuthError("invalid_grant", "This device code has already been exchanged for tokens")
    if auth.expires_at <= now:
        raise OAuthError("expired_token", "The code expired before it was approved: sign in again")
    if auth.status == DeviceAuthorization.DENIED:
        raise OAuthError("access_denied", "The sign-in was denied on the verification page")
    if auth.status == DeviceAuthorization.PENDING:
        # Polled sooner than the interval (a fifth of it is allowed for the network's jitter): slow
        # down, and the interval grows by 5 seconds for this and every later poll (RFC 8628 §3.5).
        too_soon = (auth.last_polled_at is not None
                    and (now - auth.last_polled_at).total_seconds() < auth.interval * 0.8)
        changes: dict[str, Any] = {"last_polled_at": now}
        if too_soon:
            changes["interval"] = auth.interval + 5
        DeviceAuthorization.objects.filter(pk=auth.pk).update(**changes)
        if too_soon:
            raise OAuthError("slow_down", f"Poll at most every {auth.interval + 5} seconds")
        raise OAuthError("authorization_pending", "Waiting for the code to be approved")
    # Approved: the first poll to claim it gets the tokens, any other none.
    claimed = DeviceAuthorization.objects.filter(pk=auth.pk, status=DeviceAuthorization.APPROVED).update(
        status=DeviceAuthorization.USED)
    if not claimed or auth.user is None:
        raise OAuthError("invalid_grant", "This device code has already been exchanged for tokens")
    user = auth.user
    if not user.is_active:
        raise OAuthError("access_denied", "This account is deactivated")
    return issue(user, auth.surface, auth.user_agent)


# ------------------------------------------------------------------ the verification page


def over_attempt_limit(ip: str) -> bool:
    """This address entered too many codes that matched nothing lately (RFC 8628 §5.1)."""

    window = _seconds("GATEWAY_SIGNIN_ATTEMPT_WINDOW", 600)
    limit = _seconds("GATEWAY_SIGNIN_ATTEMPTS_PER_IP", 10)
    since = timezone.now() - dt.timedelta(seconds=window)
    return VerificationAttempt.objects.filter(ip=ip, created_at__gte=since).count() >= limit


def pending(user_code: str, ip: str) -> DeviceAuthorization | None:
    """The authorization waiting for this user code; a miss counts against ``ip``."""

    code = codes.normalize_user_code(user_code)
    auth = None
    if len(code) == codes.USER_CODE_LENGTH:
        auth = DeviceAuthorization.objects.filter(
            user_code=code, status=DeviceAuthorization.PENDING, expires_at__gt=timezone.now()).first()
    if auth is None:
        VerificationAttempt.objects.create(ip=ip)
    return auth


def decide(auth: DeviceAuthorization, user: Any, approve: bool) -> bool:
    """Approve or deny a pending authorization as ``user``; False when it was no longer pending."""

    if approve:
        own_key(user)
    status = DeviceAuthorization.APPROVED if approve else DeviceAuthorization.DENIED
    return bool(DeviceAuthorization.objects.filter(
        pk=auth.pk, status=DeviceAuthorization.PENDING, expires_at__gt=timezone.now()).update(
        status=status, user=user, decided_at=timezone.now()))


def own_key(user: Any) -> ApiKey:
    """The developer's own client key, made on their first sign-in. Its secret is never shown nor
    presented (their bearer tokens act as the key), so a random one is hashed and forgotten."""

    key = ApiKey.objects.filter(user=user).first()
    if key is not None:
        return key
    base = f"@{user.get_username()}"[:90]
    for n in range(1, 50):
        name = base if n == 1 else f"{base}-{n}"
        if ApiKey.objects.filter(name=name).exists():
            continue
        key = ApiKey(name=name, user=user)
        plain = new_client_key()
        key.set_key(plain)
        key.key_hint = "signed in"
        try:
            with transaction.atomic():
                key.save()
            return key
        except IntegrityError:  # made meanwhile by another request, or the name was just taken
            found = ApiKey.objects.filter(user=user).first()
            if found is not None:
                return found
    raise RuntimeError(f"no free client key name for {mask(base)}")


# ------------------------------------------------------------------ tokens


def issue(user: Any, surface: str, user_agent: str, sign_in: SignIn | None = None) -> Issued:
    now = timezone.now()
    access, refresh = codes.new_access_token(), codes.new_refresh_token()
    ttl = access_ttl()
    with transaction.atomic():
        if sign_in is None:
            sign_in = SignIn.objects.create(user=user, surface=surface[:100], user_agent=user_agent[:200],
                                            created_at=now)
        Token.objects.create(token_hash=codes.digest(access), kind=Token.ACCESS, sign_in=sign_in, created_at=now,
                             expires_at=now + dt.timedelta(seconds=ttl))
        Token.objects.create(token_hash=codes.digest(refresh), kind=Token.REFRESH, sign_in=sign_in, created_at=now,
                             expires_at=now + dt.timedelta(seconds=_seconds("GATEWAY_SIGNIN_REFRESH_TTL",
                                                                            30 * 86400)))
    return Issued(access, refresh, ttl, user.email or "")


def refresh(refresh_token: str) -> Issued:
    """A fresh pair for a refresh token, which is used up. 401 ``invalid_grant`` for one that is
    unknown, used, expired or revoked, and for a developer whose account or key was deactivated:
    the deprovisioning hook (the client signs the developer out)."""

    tok = Token.objects.select_related("sign_in", "sign_in__user").filter(
        token_hash=codes.digest(refresh_token), kind=Token.REFRESH).first()
    refused = OAuthError("invalid_grant", "The sign-in has ended: sign in again", status=401)
    if tok is None or tok.expires_at <= timezone.now() or tok.sign_in.revoked_at is not None:
        raise refused
    user = tok.sign_in.user
    if not user.is_active or not ApiKey.objects.filter(user=user, active=True).exists():
        raise refused
    with transaction.atomic():
        if not Token.objects.filter(pk=tok.pk).delete()[0]:  # another refresh used it first
            raise refused
        SignIn.objects.filter(pk=tok.sign_in_id).update(refreshed_at=timezone.now())
        return issue(user, tok.sign_in.surface, tok.sign_in.user_agent, sign_in=tok.sign_in)


def revoke(token: str) -> None:
    """RFC 7009: the sign-in the token belongs to ends, access and refresh tokens alike. An unknown
    token is no error (the client revokes best effort, and twice)."""

    tok = Token.objects.filter(token_hash=codes.digest(token)).only("sign_in_id").first()
    if tok is not None:
        end_sign_ins(SignIn.objects.filter(pk=tok.sign_in_id))


def end_sign_ins(queryset: Any) -> int:
    """Revoke these sign-ins (sign-out, the admin's action); bearer caches of this process forget them."""

    ended = int(queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now()))
    if ended:
        configversion.bump()  # every gateway process forgets the sign-in's bearers at its next request
        transaction.on_commit(lambda: signals.sign_ins_changed.send(sender=SignIn))
    return ended


@dataclass(frozen=True)
class Bearer:
    key: ApiKey
    surface: str
    expires_at: dt.datetime


def bearer(token_hash: str) -> Bearer | str | None:
    """Who an access token belongs to: their key and client, or why it is refused (a sentence for
    the 401), or None for a token the gateway never issued. One query."""

    tok = (Token.objects.select_related("sign_in", "sign_in__user", "sign_in__user__client_key")
           .filter(token_hash=token_hash, kind=Token.ACCESS).first())
    if tok is None:
        return None
    sign_in, user = tok.sign_in, tok.sign_in.user
    if sign_in.revoked_at is not None:
        return "This sign-in was revoked: sign in to the gateway again (/login)"
    if tok.expires_at <= timezone.now():
        return "This sign-in has expired: sign in to the gateway again (/login)"
    if not user.is_active:
        return "This account is deactivated: ask your gateway's administrators"
    key = getattr(user, "client_key", None)
    if key is None or not key.active:
        return "This account's client key is disabled: ask your gateway's administrators"
    return Bearer(key, sign_in.surface, tok.expires_at)


def prune(now: dt.datetime) -> None:
    """What no request can use any more: run on each new sign-in, so the tables stay small."""

    day_ago = now - dt.timedelta(days=1)
    DeviceAuthorization.objects.filter(expires_at__lt=day_ago).delete()
    Token.objects.filter(expires_at__lt=day_ago).delete()
    window = _seconds("GATEWAY_SIGNIN_ATTEMPT_WINDOW", 600)
    VerificationAttempt.objects.filter(created_at__lt=now - dt.timedelta(seconds=window)).delete()
