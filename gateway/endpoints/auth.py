"""Who is calling: a client key or a signed-in developer's bearer token, from ``Authorization: Bearer``
(or ``x-api-key``), turned into the caller's :class:`KeyInfo`.

:func:`identify` is the one place a presented credential becomes a caller, for every endpoint:
a client key is found by its hash in the snapshot (or read afresh); an access token from the
sign-in (``signin``, Claude Code's gateway protocol) acts as its developer's own key, with the
client they signed in with as the caller's ``surface``.
"""

from __future__ import annotations

import time
from typing import Protocol

from accounts.secrets import hash_client_key
from signin.codes import looks_like_bearer

from ..edge.request import ApiRequest
from ..errors import AuthenticationFailed
from ..state import KeyInfo, Snapshot

# The client gives up at once on a 401 that says so, instead of retrying for minutes (the protocol's
# Errors table): a credential that was refused now will be refused again.
NO_RETRY = {"x-should-retry": "false"}


class Credentials(Protocol):
    """Where callers are found (``gateway.state.SnapshotCache``)."""

    async def find_key(self, key_hash: str) -> KeyInfo | None: ...

    async def find_bearer(self, token_hash: str) -> KeyInfo | str | None: ...


def presented_key(request: ApiRequest, allow_x_api_key: bool) -> str | None:
    auth = request.header("authorization")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    if allow_x_api_key:
        return request.header("x-api-key").strip() or None
    return None


async def identify(plain: str, snap: Snapshot, credentials: Credentials) -> KeyInfo:
    """The caller a presented credential stands for; AuthenticationFailed (401, no retry) for one
    that is unknown, revoked or expired (a rotated key's old secret past its grace is expired)."""

    digest = hash_client_key(plain)
    info = snap.keys.get(digest)
    if info is None and looks_like_bearer(plain):
        found = await credentials.find_bearer(digest)
        if isinstance(found, str):
            raise AuthenticationFailed(found, headers=dict(NO_RETRY))
        info = found
    if info is None:
        # Keys created since the snapshot was taken are found here; unknown ones cost one indexed query.
        info = await credentials.find_key(digest)
    if info is None or not info.active:
        refused = AuthenticationFailed("Invalid API key", headers=dict(NO_RETRY))
        refused.refused_key = info  # an inactive key's refusal is logged under it (never said to the client)
        raise refused
    why = info.refused_now(time.time())
    if why is not None:  # the holder of a real secret learns why: expired, or replaced by a rotation
        refused = AuthenticationFailed(why, headers=dict(NO_RETRY))
        refused.refused_key = info
        raise refused
    return info


async def authenticate(request: ApiRequest, snap: Snapshot, allow_x_api_key: bool,
                       credentials: Credentials) -> KeyInfo:
    plain = presented_key(request, allow_x_api_key)
    if not plain:
        raise AuthenticationFailed("Missing API key: send it as 'Authorization: Bearer <key>'"
                                   + (" or 'x-api-key'" if allow_x_api_key else ""))
    return await identify(plain, snap, credentials)
