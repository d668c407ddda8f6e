"""``GET /v1/models``: the models a client key can use, from the aliases, the providers' served
models and each provider's own /models (cached); ``gateway.endpoints.model_shapes`` writes them in the
caller's shape.

A name is listed only when the gateway routes it (``gateway.exchange.routing.resolve``): an upstream's
name that routes nowhere as it is is listed as ``provider/name``, which does. Each entry carries
the metadata of the alias that routes it.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accounts.db import hop

from ..errors import ModelNotFound
from ..exchange.routing import alias_for, resolve
from ..exchange.upstream import NETWORK_ERRORS, UpstreamClient
from ..state import ProviderInfo, Snapshot

log = logging.getLogger(__name__)

FAILURE_TTL = 30.0

_CacheKey = tuple[int, str]


@dataclass(frozen=True)
class ModelEntry:
    id: str
    owner: str  # the provider the name routes to
    metadata: dict[str, Any] = field(default_factory=dict)


def _any_secret(provider_id: int) -> str | None:
    from accounts.models import Account

    account = Account.objects.filter(provider_id=provider_id, status=Account.ACTIVE).order_by("id").first()
    return account.get_secret() if account else None


class ModelCatalog:
    def __init__(self, upstream: UpstreamClient, ttl: float, clock: Callable[[], float] = time.monotonic,
                 secret_of: Callable[[int], str | None] = _any_secret) -> None:
        self._upstream = upstream
        self._ttl = ttl
        self._clock = clock
        self._secret_of = secret_of
        self._cache: dict[_CacheKey, tuple[float, list[str]]] = {}  # key → (expires at, names)
        self._locks: dict[_CacheKey, asyncio.Lock] = {}

    def _fresh(self, key: _CacheKey) -> list[str] | None:
        hit = self._cache.get(key)
        return hit[1] if hit and self._clock() < hit[0] else None

    async def upstream_models(self, provider: ProviderInfo) -> list[str]:
        key = (provider.id, provider.base_url)
        if (names := self._fresh(key)) is not None:
            return names
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if (names := self._fresh(key)) is not None:
                return names  # another caller fetched it while we waited
            names, ok = await self._fetch(provider)
            ttl = self._ttl if ok else min(FAILURE_TTL, self._ttl)
            self._cache[key] = (self._clock() + ttl, names)
            return names

    async def _fetch(self, provider: ProviderInfo) -> tuple[list[str], bool]:
        secret = await hop(self._secret_of, provider.id)
        if secret is None:
            return [], False
        try:
            data = await self._upstream.get_json(provider, secret, "/models")
            return [str(m["id"]) for m in data.get("data", []) if isinstance(m, dict) and "id" in m], True
        except (*NETWORK_ERRORS, ValueError, KeyError, AttributeError) as exc:
            # A provider without a /models endpoint still lists what it is configured to serve.
            log.info("provider %s: /models unavailable (%s)", provider.name, type(exc).__name__)
            return [], False

    async def entries(self, snap: Snapshot, listed: Callable[[str], bool] = lambda model: True) -> list[ModelEntry]:
        """Every model the gateway routes that ``listed`` lets through (the client key's model list), by id."""

        names: list[str] = []
        for provider in snap.providers.values():
            names += provider.served_models
        names += [a.pattern for a in snap.aliases if not a.is_glob and a.provider_id in snap.providers]
        providers = list(snap.providers.values())
        fetched = await asyncio.gather(*(self.upstream_models(p) for p in providers))
        for provider, upstream_names in zip(providers, fetched):
            for name in upstream_names:
                names.append(name if _routes(name, snap) else f"{provider.name}/{name}")
        found = (entry_for(name, snap) for name in dict.fromkeys(names) if listed(name))
        return sorted((e for e in found if e is not None), key=lambda e: e.id)


def _routes(model: str, snap: Snapshot) -> bool:
    try:
        resolve(model, snap)
    except ModelNotFound:
        return False
    return True


def entry_for(model: str, snap: Snapshot) -> ModelEntry | None:
    """``model`` as the listing shows it, or None when the gateway does not route it."""

    try:
        route = resolve(model, snap)
    except ModelNotFound:
        return None
    alias = alias_for(model, snap)
    return ModelEntry(model, route.provider.name, dict(alias.metadata) if alias else {})
