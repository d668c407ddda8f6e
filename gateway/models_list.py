"""``GET /v1/models``: each provider's models (from its own /models, cached) plus the aliases."""

from __future__ import annotations

import logging
import time
from typing import Any

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings

from .routing import listed_models
from .state import ProviderInfo, Snapshot
from .upstream import NETWORK_ERRORS, upstream

log = logging.getLogger(__name__)

_cache: dict[int, tuple[float, list[str]]] = {}


def _any_secret(provider_id: int) -> str | None:
    from accounts.models import Account

    account = Account.objects.filter(provider_id=provider_id, status=Account.ACTIVE).order_by("id").first()
    return account.get_secret() if account else None


async def _upstream_models(provider: ProviderInfo) -> list[str]:
    hit = _cache.get(provider.id)
    if hit and time.monotonic() - hit[0] < settings.GATEWAY_MODELS_CACHE_TTL:
        return hit[1]
    names: list[str] = []
    secret = await sync_to_async(_any_secret, thread_sensitive=False)(provider.id)
    if secret:
        try:
            data = await upstream.get_json(provider, secret, "/models")
            names = [str(m["id"]) for m in data.get("data", []) if isinstance(m, dict) and "id" in m]
        except (*NETWORK_ERRORS, httpx.HTTPError, ValueError, KeyError, AttributeError) as exc:
            # A provider without a /models endpoint still lists what it is configured to serve.
            log.info("provider %s: /models unavailable (%s)", provider.name, type(exc).__name__)
    _cache[provider.id] = (time.monotonic(), names)
    return names


async def list_models(snap: Snapshot) -> dict[str, Any]:
    seen = dict(listed_models(snap))
    for provider in snap.providers.values():
        for name in await _upstream_models(provider):
            seen.setdefault(name, provider.name)
    created = int(time.time())
    return {"object": "list",
            "data": [{"id": name, "object": "model", "created": created, "owned_by": owner}
                     for name, owner in sorted(seen.items())]}
