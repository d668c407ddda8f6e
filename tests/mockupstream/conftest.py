"""One real mock upstream per test session, on a free loopback port."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from mockupstream.server import ServerThread


@pytest.fixture(scope="session")
def mock_server() -> Iterator[ServerThread]:
    with ServerThread() as server:
        yield server


@pytest.fixture()
def base_url(mock_server: ServerThread) -> str:
    return mock_server.url


@pytest.fixture()
def http(base_url: str) -> Iterator[httpx.Client]:
    """A raw client; counters are reset first so each test reads its own numbers."""

    with httpx.Client(base_url=base_url, timeout=10) as client:
        client.post("/_mock/reset").raise_for_status()
        yield client
