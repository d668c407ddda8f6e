"""The real gateway and scripted upstream of the end-to-end tests, with a pool whose aliases the agent clients ask for."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from accounts.config_file import load
from tests.e2e.conftest import gateway, mock_upstream, pool_config  # noqa: F401 - fixtures shared with e2e
from tests.servers import Server, received, seen

UPSTREAMS = ["openai_chat", "anthropic", "responses"]


def alias(upstream: str) -> str:
    """The model name an agent client asks for to reach ``mock-shell`` on ``upstream``'s protocol."""

    return f"shell-{upstream}"


@pytest.fixture
def agent_pool(transactional_db: Any, mock_upstream: Server, gateway: Server) -> dict[str, Any]:
    """The e2e pool (one provider per protocol on the scripted upstream) plus an alias per protocol."""

    config = pool_config(mock_upstream)
    config["aliases"] = [{"name": alias(p), "provider": f"up-{p}", "model": "mock-shell"} for p in UPSTREAMS]
    load(config)
    seen(gateway)
    httpx.post(mock_upstream.url + "/_mock/reset")
    return config


@dataclass(frozen=True)
class Marker:
    """A command whose output the prompt does not contain: only running it yields ``output``."""

    command: str
    output: str

    @property
    def prompt(self) -> str:
        return f"Run `{self.command}` and tell me exactly what it printed."


@pytest.fixture
def marker() -> Marker:
    a, b = random.randint(1000, 9999), random.randint(1000, 9999)
    return Marker(f"echo acc-tool-ok-$(({a}*{b}))", f"acc-tool-ok-{a * b}")


def check_upstream(mock: Server, why: str) -> list[dict[str, Any]]:
    """The scripted upstream saw the turn's two requests (the ask, then the tool result), both streaming.

    A third request would be a retry; ``stream`` other than true, the client's fallback to a
    non-streaming request after a stream it could not read.
    """

    requests = received(mock)
    summary = [(r["path"], r["body"].get("model"), r["body"].get("stream")) if isinstance(r["body"], dict)
               else (r["path"], r["body"][:200]) for r in requests]
    assert len(requests) == 2, f"upstream requests: {summary}{why}"
    assert all(isinstance(r["body"], dict) and r["body"].get("stream") is True for r in requests), \
        f"upstream requests: {summary}{why}"
    return requests
