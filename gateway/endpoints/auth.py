"""Client authentication: the key from ``Authorization: Bearer`` (or ``x-api-key``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from accounts.secrets import hash_client_key

from ..edge.request import ApiRequest
from ..errors import AuthenticationFailed
from ..state import KeyInfo, Snapshot

# A key by hash, read afresh (``SnapshotCache.find_key``).
FindKey = Callable[[str], Awaitable[KeyInfo | None]]


def presented_key(request: ApiRequest, allow_x_api_key: bool) -> str | None:
    auth = request.header("authorization")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    if allow_x_api_key:
        return request.header("x-api-key").strip() or None
    return None


async def authenticate(request: ApiRequest, snap: Snapshot, allow_x_api_key: bool, find_key: FindKey) -> KeyInfo:
    plain = presented_key(request, allow_x_api_key)
    if not plain:
        raise AuthenticationFailed("Missing API key: send it as 'Authorization: Bearer <key>'"
                                   + (" or 'x-api-key'" if allow_x_api_key else ""))
    digest = hash_client_key(plain)
    info = snap.keys.get(digest)
    if info is None:
        # Keys created since the snapshot was taken are found here; unknown ones cost one indexed query.
        info = await find_key(digest)
    if info is None:
        raise AuthenticationFailed("Invalid API key")
    return info
