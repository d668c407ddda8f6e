"""``GET /v1/models``: each provider's models (from its own /models, cached) plus the aliases.

Each process caches a provider's list for ``GATEWAY_MODELS_CACHE_TTL`` seconds
(5 minutes), keyed by provider and base URL so a re-pointed provider is fetched
afresh. A failed fetch is remembered only briefly: one bad minute upstream must
not hide a provider's models for the whole TTL. Providers are asked
concurrently, and concurrent callers of a cold entry share one fetch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from .routing import listed_models
from .state import ProviderInfo, Snapshot
from .upstream import NETWORK_ERRORS, upstream

log = logging.getLogger(__name__)

FAILURE_TTL = 30.0

_clock = time.monotonic  # tests move time forward through this
_CacheKey = tuple[int, str]
_cache: dict[_CacheKey, tuple[float, list[str]]] = {}  # key → (expires at, names)
_locks: dict[_CacheKey, asyncio.Lock] = {}


def _any_secret(provider_id: int) -> str | None:
    from accounts.models import Account

    account = Account.objects.filter(provider_id=provider_id, status=Account.ACTIVE).order_by("id").first()
    return account.get_secret() if account else None


def _fresh(key: _CacheKey) -> list[str] | None:
    hit = _cache.get(key)
    return hit[1] if hit and _clock() < hit[0] else None


async def upstream_models(provider: ProviderInfo) -> list[str]:
    key = (provider.id, provider.base_url)
    if (names := _fresh(key)) is not None:
        return names
    lock = _locks.setdefault(key, asyncio.Lock())
    async with lock:
        if (names := _fresh(key)) is not None:
            return names  # another caller fetched it while we waited
        names, ok = await _fetch(provider)
        ttl = settings.GATEWAY_MODELS_CACHE_TTL if ok else min(FAILURE_TTL, settings.GATEWAY_MODELS_CACHE_TTL)
        _cache[key] = (_clock() + ttl, names)
        return names


async def _fetch(provider: ProviderInfo) -> tuple[list[str], bool]:
    secret = await sync_to_async(_any_secret, thread_sensitive=False)(provider.id)
    if secret is None:
        return [], False
    try:
        data = await upstream.get_json(provider, secret, "/models")
        return [str(m["id"]) for m in data.get("data", []) if isinstance(m, dict) and "id" in m], True
    except (*NETWORK_ERRORS, ValueError, KeyError, AttributeError) as exc:
        # A provider without a /models endpoint still lists what it is configured to serve.
        log.info("provider %s: /models unavailable (%s)", provider.name, type(exc).__name__)
        return [], False


async def list_models(snap: Snapshot) -> dict[str, Any]:
    seen = dict(listed_models(snap))
    providers = list(snap.providers.values())
    fetched = await asyncio.gather(*(upstream_models(p) for p in providers))
    for provider, names in zip(providers, fetched):
        for name in names:
            seen.setdefault(name, provider.name)
    created = int(time.time())
    return {"object": "list",
            "data": [{"id": name, "object": "model", "created": created, "owned_by": owner}
                     for name, owner in sorted(seen.items())]}


def clear_cache() -> None:
    _cache.clear()
    _locks.clear()
