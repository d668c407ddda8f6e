"""Client authentication: the key from ``Authorization: Bearer`` (or ``x-api-key``)."""

from __future__ import annotations

import hmac

from django.http import HttpRequest

from accounts.db import hop
from accounts.secrets import hash_client_key

from .errors import AuthenticationFailed
from .state import KeyInfo, Snapshot, key_info


def presented_key(request: HttpRequest, allow_x_api_key: bool) -> str | None:
    # META, not request.headers: that builds a mapping of every header just to read one or two.
    meta = request.META
    auth = meta.get("HTTP_AUTHORIZATION", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    if allow_x_api_key:
        return meta.get("HTTP_X_API_KEY", "").strip() or None
    return None


def _lookup(key_hash: str) -> KeyInfo | None:
    from accounts.models import ApiKey

    k = ApiKey.objects.filter(key_hash=key_hash, active=True).first()
    # The database matched on the hash already; comparing again in constant time
    # keeps a timing side channel out of any cache or index behaviour.
    if k is None or not hmac.compare_digest(k.key_hash, key_hash):
        return None
    return key_info(k)


async def authenticate(request: HttpRequest, snap: Snapshot, allow_x_api_key: bool) -> KeyInfo:
    plain = presented_key(request, allow_x_api_key)
    if not plain:
        raise AuthenticationFailed("Missing API key: send it as 'Authorization: Bearer <key>'"
                                   + (" or 'x-api-key'" if allow_x_api_key else ""))
    digest = hash_client_key(plain)
    info = snap.keys.get(digest)
    if info is None:
        # Keys created since the snapshot was taken are found here; unknown ones cost one indexed query.
        info = await hop(_lookup, digest)
    if info is None:
        raise AuthenticationFailed("Invalid API key")
    return info
