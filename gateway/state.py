"""A short-lived in-process snapshot of configuration: providers, aliases, client keys.

These change rarely and are read on every request, so each process keeps a copy instead of
querying per request. A change takes effect on the first request after it commits, on every
process: the copy carries the configuration's version (``accounts.configversion``), and a
request that learns of another one (``gateway.configwatch``: the version row, a database
notification, or :meth:`SnapshotCache.changed` from this process's own commit) waits for a copy
read after it. Besides, a copy older than ``GATEWAY_CONFIG_TTL`` seconds is read again in the
background while it is still served, for writes that bumped nothing (raw SQL). Pool state (which
account is usable) is not part of it: see ``accounts.pool``.
"""

from __future__ import annotations

import datetime as dt
import hmac
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from accounts.db import hop
from accounts.prices import micro_dollars
from accounts.refresh import Refresh
from translation.ir import UpstreamCaps

from .configwatch import Watch
from .log.knownsecrets import KnownSecrets

log = logging.getLogger(__name__)


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
class TeamInfo:
    """A team (accounts.Team) as its keys carry it: budgets and allowed models on top of each key's own."""

    id: int
    name: str
    allowed_models: tuple[str, ...] = ()  # empty: no restriction beyond the key's
    usd_budgets: tuple[tuple[str, int], ...] = ()  # as KeyInfo's, spent by all of the team's keys together


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
    active: bool = True  # False: found by its hash but deactivated (refused, the refusal logged under it)
    team: TeamInfo | None = None  # the team's own limits (an active team's; its id is team_id)
    expires_at: float | None = None  # Unix seconds: refused from then on
    # Set on the entry of a rotated key's previous secret only: Unix seconds its grace ends.
    grace_until: float | None = None

    def refused_now(self, now: float) -> str | None:
        """Why this key is refused at ``now`` though found and active (expired, or an old secret past its
        grace), a sentence for the 401; None: it is served. A float compare a request: the snapshot
        need not change when a time passes."""

        if self.grace_until is not None and now >= self.grace_until:
            return (f"This API key was rotated: the secret sent stopped working at {_utc(self.grace_until)}; "
                    "use the key's new secret")
        if self.expires_at is not None and now >= self.expires_at:
            return f"This API key expired at {_utc(self.expires_at)}: ask your gateway's administrators for a new one"
        return None


def _utc(seconds: float) -> str:
    return f"{dt.datetime.fromtimestamp(seconds, dt.timezone.utc):%Y-%m-%d %H:%M:%S} UTC"


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
    version: int = 0  # the configuration's version, read before the rest: the copy holds at least its changes
    # Model name → where this configuration routes it (gateway.exchange.routing fills it): a copy is
    # never changed once loaded, so its routes are worked out once, not on every request.
    routes: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


def _load() -> Snapshot:
    from accounts import configversion
    from accounts.models import ApiKey, ModelAlias, Provider

    snap = Snapshot(version=configversion.read())
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
    now = time.time()
    for k in ApiKey.objects.filter(active=True).select_related("team"):
        info = key_info(k)
        if not info.active:  # its team is deactivated: found afresh and refused under its name
            continue
        snap.keys[k.key_hash] = info
        old = previous_secret(k, info)
        if old is not None and old.grace_until is not None and old.grace_until > now and k.previous_key_hash:
            snap.keys[k.previous_key_hash] = old  # past its grace it is found afresh, refused and logged
    return snap


def _usd(owner: Any) -> tuple[tuple[str, int], ...]:
    return tuple((window, micro_dollars(limit)) for window, limit in owner.usd_budget_limits())


def key_info(k: Any) -> KeyInfo:
    """A client key (accounts.ApiKey, its team read with it) as the request path sees it. A key of a
    deactivated team is inactive."""

    t = k.team if k.team_id is not None else None
    team = TeamInfo(t.pk, t.name, tuple(t.allowed_models or ()), _usd(t)) if t is not None else None
    expires = k.expires_at.timestamp() if k.expires_at is not None else None
    return KeyInfo(k.pk, k.name, tuple(k.allowed_models or ()), k.rate_limit_per_minute, k.daily_token_limit,
                   k.max_concurrent_requests, _usd(k), team_id=k.team_id, user_id=k.user_id,
                   active=k.active and (t is None or t.active), team=team, expires_at=expires)


def previous_secret(k: Any, info: KeyInfo) -> KeyInfo | None:
    """The entry of the key's previous secret (kept by a rotation), or None without one."""

    if not k.previous_key_hash:
        return None
    until = k.previous_key_until.timestamp() if k.previous_key_until is not None else float("-inf")
    return replace(info, grace_until=until)


def _find_key(key_hash: str) -> KeyInfo | None:
    from django.db.models import Q

    from accounts.models import ApiKey

    # An inactive one too, and a rotated key's previous secret: their refusals name the key.
    k = ApiKey.objects.select_related("team").filter(Q(key_hash=key_hash) | Q(previous_key_hash=key_hash)).first()
    if k is None:
        return None
    # The database matched on the hash already; comparing again in constant time
    # keeps a timing side channel out of any cache or index behaviour.
    if hmac.compare_digest(k.key_hash, key_hash):
        return key_info(k)
    if k.previous_key_hash and hmac.compare_digest(k.previous_key_hash, key_hash):
        return previous_secret(k, key_info(k))
    return None


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
    """``load`` reads a snapshot, ``find_key`` a client key by hash (active or not), ``find_bearer`` a
    signed-in developer's access token by hash (each synchronous, run on a worker thread): the
    database's by default, a test's own when it builds the app. ``watch``: where the configuration's
    version is learnt (``gateway.configwatch``; None: only from :meth:`changed`). ``on_change``: called
    when a change is learnt (the app's pool re-reads). ``known_secrets``: re-read with each snapshot
    (body logging on), else never built.

    Bearer tokens are remembered for the configuration TTL (never past their expiry) and forgotten
    whenever a change is learnt: a sign-in ended or a developer deactivated bumps the configuration's
    version like any other change (``signin.flow``), so every process refuses the token's next request."""

    BEARERS_HELD = 10_000  # past this many remembered tokens the memory starts over

    CATCH_UP_READS = 3  # a request waits for at most this many re-reads to catch up with changes

    def __init__(self, ttl: float, load: Callable[[], Snapshot] = _load,
                 find_key: Callable[[str], KeyInfo | None] = _find_key,
                 known_secrets: KnownSecrets | None = None,
                 find_bearer: Callable[[str], BearerFound | None] = _find_bearer, watch: Watch | None = None,
                 on_change: Callable[[], None] | None = None) -> None:
        self._ttl = ttl
        self._load = load
        self._find_key = find_key
        self._find_bearer = find_bearer
        self._bearers: dict[str, tuple[KeyInfo | str | None, float]] = {}
        self.known_secrets = known_secrets
        self.watch = watch
        self._on_change = on_change
        self._snap = Snapshot()
        self._refresh = Refresh(self._reread, "configuration")
        self._changes = 0  # changes heard of (signals, notifications)
        self._read_after = 0  # how many of them the copy held was read after
        self._read_at = float("-inf")  # monotonic time the read of the copy held began
        self._checked = (0, float("-inf"))  # the version the watch read last, and when that read began
        from signin.signals import sign_ins_changed

        sign_ins_changed.connect(self._forget_bearers, weak=True)

    async def get(self) -> Snapshot:
        if self.watch is not None:
            checked = await self.watch.latest()
            if checked is not None and checked[1] > self._checked[1]:
                learnt = checked[0] != self._checked[0]
                self._checked = checked
                if learnt and self._stale():
                    self._learnt()
        if self._stale():
            await self._catch_up()
        else:
            await self._refresh.ensure(self._ttl)
        return self._snap

    def changed(self, **kwargs: Any) -> None:
        """A change committed (this process's, or one the database told of): the next request waits
        for a copy read after it. Callable from any thread (a Django signal receiver)."""

        self._changes += 1
        self._learnt()

    def _learnt(self) -> None:
        self._bearers.clear()
        if self._on_change is not None:
            self._on_change()

    def _stale(self) -> bool:
        """A change heard of since the copy was read, or a version read after the copy's began that
        is not the copy's (compared, not ordered: a restored database starts again from 1)."""

        version, read_at = self._checked
        return self._read_after < self._changes or (self._read_at < read_at and self._snap.version != version)

    async def _catch_up(self) -> None:
        for _ in range(self.CATCH_UP_READS):  # a re-read begun before the change does not count
            try:
                await self._refresh.ensure(0)
            except Exception:  # noqa: BLE001 - the database away: the copy held serves (DESIGN)
                log.warning("configuration not re-read after a change; serving the copy held", exc_info=True)
                return
            if not self._stale():
                return

    @property
    def latest(self) -> Snapshot:
        """The snapshot held now, without re-reading (for code that may not wait: the metrics)."""

        return self._snap

    async def find_key(self, key_hash: str) -> KeyInfo | None:
        """A client key read afresh (active or not, as its ``active`` says): one created since the
        snapshot was taken is found here, and an inactive one for its refusal's log row."""

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
        changes, started = self._changes, time.monotonic()
        self._snap = await hop(self._read)
        self._read_after, self._read_at = changes, started

    def _read(self) -> Snapshot:
        snap = self._load()
        if self.known_secrets is not None:
            self.known_secrets.reload()  # the log writer reads the upstream keys from there
        return snap

    def invalidate(self) -> None:
        self._refresh.invalidate()
