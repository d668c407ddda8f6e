"""Sign-in fixtures: the e2e gateway and scripted upstream, a pool, and developers (Django users)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from accounts.config_file import load
from tests.e2e.conftest import CLIENT_KEY, gateway, mock_upstream, pool_config  # noqa: F401 - shared fixtures
from tests.servers import Server, seen

PASSWORD = "correct horse battery staple"


@pytest.fixture
def pool(transactional_db: Any, mock_upstream: Server, gateway: Server) -> dict[str, Any]:
    config = pool_config(mock_upstream)
    load(config)
    seen(gateway)
    httpx.post(mock_upstream.url + "/_mock/reset")
    return config


@pytest.fixture
def developer(transactional_db: Any) -> Any:
    """A developer who is not staff: the verification page is theirs as much as the admin's."""

    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("alice", "alice@example.com", PASSWORD)
