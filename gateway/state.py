"""A short-lived in-process snapshot of configuration: providers, aliases, client keys.

These change rarely and are read on every request, so each process keeps a
copy for ``GATEWAY_CONFIG_TTL`` seconds instead of querying per request, and
past that serves the copy while a fresh one is read in the background. Pool
state (which account is usable) is not part of it: see ``accounts.pool``.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from accounts.db import hop
from accounts.prices import micro_dollars
from accounts.refresh import Refresh
from translation.ir import UpstreamCaps

from .log.knownsecrets import KnownSecrets


@dataclass(frozen=True)
class ProviderInfo:
    id: int
    name: str
    protocol: str
    base_url: str
    headers: dict[str, str]
    served_models: tuple[str, ...]
    selection: str
    connect_timeout: float
    first_byte_timeout: float
    idle_timeout: float
    proxy_url: str
    caps: UpstreamCaps
    anthropic_version: str
    rules: list[dict[str, Any]]
    auto_prefix: bool = False  # the upstream wants vendor-prefixed model names (see routing)
    affinity: bool = True  # sessions keep their account (gateway.exchange.selection)
    affinity_ttl: float = 300.0  # seconds after a session's last request
    prices: dict[str, Any] = field(default_factory=dict)  # accounts.prices: USD per million tokens by model


@dataclass(frozen=True)
class KeyInfo:
    id: int
    name: str
    allowed_models: tuple[str, ...]
    rate_limit_per_minute: int | None
    daily_token_limit: int | None
    max_concurrent_requests: int | None = None
    # (window name as in accounts.budgetwindows, limit in micro-dollars) for each USD budget the key has
    usd_budgets: tuple[tuple[str, int], ...] = ()
    team_id: int | None = None  # accounts.Team: budgets and allowed models shared across its keys
    user_id: int | None = None  # the signed-in developer this key stands for (their bearers act as it)
    surface: str = ""  # a bearer's: the client application its developer signed in with (claude_code)


@dataclass(frozen=True)
class AliasInfo:
    pattern: str
    is_glob: bool
    provider_id: int
    upstream_model: str
    priority: int
    metadata: dict[str, Any] = field(default_factory=dict)  # what /v1/models says of it (accounts.model_metadata)


@dataclass
class Snapshot:
    providers: dict[int, ProviderInfo] = field(default_factory=dict)
    aliases: list[AliasInfo] = field(default_factory=list)
    keys: dict[str, KeyInfo] = field(default_factory=dict)  # by key hash


def _load() -> Snapshot:
    from accounts.models import ApiKey, ModelAlias, Provider

    snap = Snapshot()
    for p in Provider.objects.filter(enabled=True):
        snap.providers[p.pk] = ProviderInfo(
            id=p.pk, name=p.name, protocol=p.protocol, base_url=p.base_url,
            headers={str(k): str(v) for k, v in (p.headers or {}).items()},
            served_models=tuple(p.served_models or ()), selection=p.selection,
            connect_timeout=p.connect_timeout, first_byte_timeout=p.first_byte_timeout,
            idle_timeout=p.idle_timeout, proxy_url=p.proxy_url,
            caps=UpstreamCaps(thinking=p.accepts_thinking, cache_control=p.accepts_cache_control,
                              structured_output=p.accepts_structured_output,
                              adaptive_thinking=p.accepts_adaptive_thinking,
                              request_tags=p.accepts_request_tags,
                              cache_breakpoints=p.accepts_cache_control and p.cache_breakpoints),
            anthropic_version=p.anthropic_version, rules=list(p.rules or []), auto_prefix=p.auto_prefix,
            affinity=p.affinity, affinity_ttl=p.affinity_ttl,
            prices=dict(p.prices or {}),
        )
    for a in ModelAlias.objects.filter(provider__enabled=True).order_by("-priority", "id"):
        snap.aliases.append(AliasInfo(a.name, any(c in a.name for c in "*?["), a.provider_id,
                                      a.upstream_model, a.priority, dict(a.metadata or {})))
    for k in ApiKey.objects.filter(active=True):
        snap.keys[k.key_hash] = key_info(k)
    return snap


def key_info(k: Any) -> KeyInfo:
    usd = tuple((window, micro_dollars(limit)) for window, limit in k.usd_budget_limits())
    return KeyInfo(k.pk, k.name, tuple(k.allowed_models or ()), k.rate_limit_per_minute, k.daily_token_limit,
                   k.max_concurrent_requests, usd, team_id=k.team_id, user_id=k.user_id)



def _find_key(key_hash: str) -> KeyInfo | None:
    from accounts.models import ApiKey

    k = ApiKey.objects.filter(key_hash=key_hash, active=True).first()
    # The database matched on the hash already; comparing again in constant time
    # keeps a timing side channel out of any cache or index behaviour.
    if k is None or not hmac.compare_digest(k.key_hash, key_hash):
        return None
    return key_info(k)


# A bearer token (by hash) found: the caller, or why it is refused (a sentence for the 401); and
# until when (wall clock) that answer holds, at the latest: the token's expiry.
BearerFound = tuple[KeyInfo | str, float]


def _find_bearer(token_hash: str) -> BearerFound | None:
    from signin.flow import bearer

    found = bearer(token_hash)
    if found is None:
        return None
    if isinstance(found, str):
        return found, float("inf")
    return replace(key_info(found.key), surface=found.surface), found.expires_at.timestamp()


class SnapshotCache:
    """``load`` reads a snapshot, ``find_key`` one active client key by hash, ``find_bearer`` a
    signed-in developer's access token by hash (each synchronous, run on a worker thread): the
    database's by default, a test's own when it builds the app. ``known_secrets``: re-read with
    each snapshot (body logging on), else never built.

    Bearer tokens are remembered for the configuration TTL (never past their expiry): a token
    revoked, or a developer deactivated, in this process is forgotten at once (the signal
    ``signin.signals.sign_ins_changed``), in another process within the TTL."""

    BEARERS_HELD = 10_000  # past this many remembered tokens the memory starts over

    def __init__(self, ttl: float, load: Callable[[], Snapshot] = _load,
                 find_key: Callable[[str], KeyInfo | None] = _find_key,
                 known_secrets: KnownSecrets | None = None,
                 find_bearer: Callable[[str], BearerFound | None] = _find_bearer) -> None:
        self._ttl = ttl
        self._load = load
        self._find_key = find_key
        self._find_bearer = find_bearer
        self._bearers: dict[str, tuple[KeyInfo | str | None, float]] = {}
        self.known_secrets = known_secrets
        self._snap = Snapshot()
        self._refresh = Refresh(self._reread, "configuration")
        from signin.signals import sign_ins_changed

        sign_ins_changed.connect(self._forget_bearers, weak=True)

    async def get(self) -> Snapshot:
        await self._refresh.ensure(self._ttl)
        return self._snap

    @property
    def latest(self) -> Snapshot:
        """The snapshot held now, without re-reading (for code that may not wait: the metrics)."""

        return self._snap

    async def find_key(self, key_hash: str) -> KeyInfo | None:
        """An active client key read afresh: one created since the snapshot was taken is found here."""

        return await hop(self._find_key, key_hash)

    async def find_bearer(self, token_hash: str) -> KeyInfo | str | None:
        """The caller an access token stands for, why it is refused, or None for one never issued."""

        now = time.time()
        held = self._bearers.get(token_hash)
        if held is not None and held[1] > now:
            return held[0]
        found = await hop(self._find_bearer, token_hash)
        caller, until = found if found is not None else (None, now + self._ttl)
        if self._ttl > 0:
            if len(self._bearers) >= self.BEARERS_HELD:
                self._bearers.clear()
            self._bearers[token_hash] = (caller, min(until, now + self._ttl))
        if isinstance(caller, KeyInfo) and until <= now:
            return "This sign-in has expired: sign in to the gateway again (/login)"
        return caller

    def _forget_bearers(self, **_: Any) -> None:
        self._bearers.clear()

    async def _reread(self) -> None:
        self._snap = await hop(self._read)

    def _read(self) -> Snapshot:
        snap = self._load()
        if self.known_secrets is not None:
            self.known_secrets.reload()  # the log writer reads the upstream keys from there
        return snap

    def invalidate(self) -> None:
        self._refresh.invalidate()
