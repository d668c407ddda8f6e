"""Client authentication: the key from ``Authorization: Bearer``, or ``x-api-key`` where the path
allows it; a key the snapshot does not know is looked up afresh; anything else is a 401."""

from __future__ import annotations

import asyncio

import pytest

from accounts.secrets import hash_client_key
from gateway.edge.request import ApiRequest
from gateway.endpoints.auth import authenticate
from gateway.errors import AuthenticationFailed
from gateway.state import KeyInfo
from tests.gateway.fakes import client_key, provider, snapshot

KNOWN = client_key("gw-known")
SNAP = snapshot([provider()], {"gw-known": KNOWN})


class Lookups:
    """The fresh lookup (the database's, in the gateway): which digests it was asked for."""

    def __init__(self, found: dict[str, KeyInfo] | None = None) -> None:
        self.found = {hash_client_key(k): v for k, v in (found or {}).items()}
        self.asked: list[str] = []

    async def find_key(self, digest: str) -> KeyInfo | None:
        self.asked.append(digest)
        return self.found.get(digest)

    async def find_bearer(self, digest: str) -> KeyInfo | str | None:
        self.asked.append(digest)
        return None


def auth(headers: dict[str, str], allow_x_api_key: bool = False, lookups: Lookups | None = None) -> KeyInfo:
    request = ApiRequest("POST", "/v1/x", raw_headers=[(k.lower().encode(), v.encode()) for k, v in headers.items()])
    return asyncio.run(authenticate(request, SNAP, allow_x_api_key, lookups or Lookups()))


def test_a_bearer_key_the_snapshot_knows_is_accepted_without_a_lookup() -> None:
    lookups = Lookups()
    assert auth({"Authorization": "Bearer gw-known"}, lookups=lookups) == KNOWN
    assert auth({"Authorization": "bearer   gw-known  "}) == KNOWN  # the scheme's case and spaces do not matter
    assert lookups.asked == []


def test_x_api_key_is_accepted_only_where_the_path_allows_it() -> None:
    assert auth({"x-api-key": "gw-known"}, allow_x_api_key=True) == KNOWN
    with pytest.raises(AuthenticationFailed, match="Missing API key"):
        auth({"x-api-key": "gw-known"}, allow_x_api_key=False)


def test_bearer_wins_over_x_api_key() -> None:
    with pytest.raises(AuthenticationFailed, match="Invalid"):
        auth({"Authorization": "Bearer gw-wrong", "x-api-key": "gw-known"}, allow_x_api_key=True)


def test_a_key_created_since_the_snapshot_is_found_by_the_fresh_lookup() -> None:
    new = client_key("gw-new")
    lookups = Lookups({"gw-new": new})
    assert auth({"Authorization": "Bearer gw-new"}, lookups=lookups) == new
    assert lookups.asked == [hash_client_key("gw-new")]  # by digest: the plain key goes nowhere


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer "}, {"Authorization": "Basic Z3c6a2V5"},
                                     {"Authorization": "gw-known"}])
def test_a_missing_key_is_a_401(headers: dict[str, str]) -> None:
    with pytest.raises(AuthenticationFailed, match="Missing API key") as refused:
        auth(headers)
    assert refused.value.status == 401


def test_an_unknown_key_is_a_401_after_one_lookup() -> None:
    lookups = Lookups()
    with pytest.raises(AuthenticationFailed, match="Invalid API key") as refused:
        auth({"Authorization": "Bearer gw-nobody"}, lookups=lookups)
    assert refused.value.status == 401 and len(lookups.asked) == 1
