"""End-to-end fixtures: a real gateway server and the scripted upstream, sharing the test database."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from accounts.config_file import load
from tests.servers import PRODUCTION_TTLS, Server, own_gateway, seen, start_mock

CLIENT_KEY = "gw-e2e-key"


# Package scope, not session: each package that uses these (e2e, and dashboard and hardening, which
# import them) gets its own, stopped when its tests end, flushing the gateway's request log. A
# session-wide gateway went on committing late rows to the shared database while later packages'
# tests counted theirs.
@pytest.fixture(scope="package")
def mock_upstream() -> Iterator[Server]:
    server = start_mock()
    yield server
    server.stop()


@pytest.fixture(scope="package")
def gateway(django_db_setup: Any, django_db_blocker: Any, mock_upstream: Server) -> Iterator[Server]:
    with own_gateway(django_db_blocker) as server:
        yield server


@pytest.fixture(scope="package")
def production_gateway(django_db_setup: Any, django_db_blocker: Any, mock_upstream: Server) -> Iterator[Server]:
    """A gateway with production's TTLs whatever GATEWAY_TEST_TTLS says: configuration and pool
    served from memory and re-read in the background once stale."""

    with own_gateway(django_db_blocker, ttls=PRODUCTION_TTLS) as server:
        yield server


def pool_config(mock: Server, accounts: dict[str, list[str]] | None = None, **provider_extra: Any) -> dict[str, Any]:
    """One provider per protocol, all on the scripted upstream; accounts per protocol by key."""

    accounts = accounts or {}
    providers = []
    for proto in ("openai_chat", "anthropic", "responses"):
        keys = accounts.get(proto, [f"sk-good-{proto}-1"])
        providers.append({
            "name": f"up-{proto}", "protocol": proto, "base_url": f"{mock.url}/v1",
            "models": [], "idle_timeout": 3.0, "first_byte_timeout": 10.0, **provider_extra,
            "accounts": [{"label": f"a{i}", "api_key": k} for i, k in enumerate(keys)],
        })
    aliases = []
    for proto in ("openai_chat", "anthropic", "responses"):
        aliases.append({"name": f"{proto}/*", "provider": f"up-{proto}", "model": "*"})
    return {"providers": providers, "aliases": [],
            "client_keys": [{"name": "e2e", "key": CLIENT_KEY}]}


@pytest.fixture
def pool(transactional_db: Any, mock_upstream: Server, gateway: Server) -> dict[str, Any]:
    """The default pool: good accounts on every protocol. Returns the loaded config."""

    config = pool_config(mock_upstream)
    load(config)
    seen(gateway)
    httpx.post(mock_upstream.url + "/_mock/reset")
    return config
