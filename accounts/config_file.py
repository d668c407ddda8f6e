"""``gateway.toml`` → providers, accounts, aliases and client keys, idempotently by name."""

from __future__ import annotations

import datetime as dt
import sys
import tomllib
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, TypeVar

from django.db import models, transaction

from .imports import opening_balance
from .model_metadata import validate_metadata
from .pickorder import STRATEGIES
from .models import PROTOCOL_CHOICES, Account, ApiKey, ModelAlias, Provider, Team
from .prices import validate_prices
from .rules import validate_rules
from .secrets import hash_client_key

M = TypeVar("M", bound=models.Model)
PROTOCOLS = {name for name, _ in PROTOCOL_CHOICES}
PROVIDER_FIELDS = {
    "headers": dict, "selection": str, "connect_timeout": float, "first_byte_timeout": float,
    "idle_timeout": float, "proxy_url": str, "accepts_thinking": bool, "accepts_cache_control": bool,
    "cache_breakpoints": bool,
    "accepts_structured_output": bool, "accepts_adaptive_thinking": bool, "accepts_request_tags": bool,
    "anthropic_version": str, "enabled": bool, "rules": list, "auto_prefix": bool, "prices": dict,
    "affinity": bool, "affinity_ttl": float,
}


class ConfigError(ValueError):
    pass


KINDS = ("providers", "accounts", "aliases", "client_keys")


@dataclass
class LoadReport:
    created: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    updated: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    unchanged: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))  # already as the file says
    balances_kept: int = 0  # live balances that differ from the file's and were left alone

    def count(self, kind: str, created: bool, changed: bool = True) -> None:
        (self.created if created else self.updated if changed else self.unchanged)[kind] += 1

    @property
    def changed(self) -> bool:
        return any(self.created.values()) or any(self.updated.values())


def _require(obj: dict[str, Any], key: str, where: str, kind: type = str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (kind is str and not value):
        raise ConfigError(f"{where}: '{key}' is required and must be a {kind.__name__}")
    return value


def load_file(path: str | Path, reset_balances: bool = False) -> LoadReport:
    """Load a TOML file; ``-`` reads standard input (`make run` rewrites the demo's upstream port).
    An account's ``balance`` is its opening balance: a live one is kept unless ``reset_balances``."""

    try:
        data = tomllib.loads(sys.stdin.read() if str(path) == "-" else Path(path).read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    return load(data, reset_balances)


@transaction.atomic
def load(data: dict[str, Any], reset_balances: bool = False) -> LoadReport:
    report = LoadReport()
    for i, p in enumerate(data.get("providers", [])):
        _load_provider(p, f"providers[{i}]", report, reset_balances)
    for i, a in enumerate(data.get("aliases", [])):
        where = f"aliases[{i}]"
        name = _require(a, "name", where)
        provider = Provider.objects.filter(name=_require(a, "provider", where)).first()
        if provider is None:
            raise ConfigError(f"{where}: unknown provider '{a['provider']}'")
        defaults: dict[str, Any] = {"upstream_model": a.get("model", "*"), "priority": int(a.get("priority", 0))}
        if "metadata" in a:
            if problems := validate_metadata(a["metadata"]):
                raise ConfigError(f"{where}.metadata: " + "; ".join(problems))
            defaults["metadata"] = a["metadata"]
        _, created, changed = _upsert(ModelAlias, {"name": name, "provider": provider}, defaults)
        report.count("aliases", created, changed)
    for i, k in enumerate(data.get("client_keys", [])):
        where = f"client_keys[{i}]"
        key = ApiKey(name=_require(k, "name", where))
        key.set_key(_require(k, "key", where))
        _, created, changed = _upsert(ApiKey, {"name": key.name}, {
            "key_hash": hash_client_key(k["key"]), "key_hint": key.key_hint,
            "allowed_models": list(k.get("allowed_models", [])),
            "rate_limit_per_minute": k.get("rate_limit_per_minute"),
            "daily_token_limit": k.get("daily_token_limit"),
            "max_concurrent_requests": k.get("max_concurrent_requests"),
            **{f: _usd(k.get(f), f"{where}.{f}") for f in ApiKey.USD_BUDGETS},
            "active": bool(k.get("active", True)), **_key_placement(k, where)})
        report.count("client_keys", created, changed)
    return report


def _key_placement(k: dict[str, Any], where: str) -> dict[str, Any]:
    """A key's ``team`` (by name, made if new) and ``expires_at``, each only where the file names it:
    a file written before either existed leaves what the admin set."""

    out: dict[str, Any] = {}
    if "team" in k:
        name, longest = k["team"], Team._meta.get_field("name").max_length or 0
        if name == "":
            out["team"] = None
        elif not isinstance(name, str) or len(name) > longest:
            raise ConfigError(f"{where}.team: must be a team's name (up to {longest} characters), or \"\" for none")
        else:
            out["team"] = Team.objects.get_or_create(name=name)[0]
    if "expires_at" in k:
        when = k["expires_at"]
        if when == "":
            out["expires_at"] = None
        elif not isinstance(when, dt.datetime) or when.tzinfo is None:
            raise ConfigError(f"{where}.expires_at: must be a TOML date-time with its offset "
                              "(2027-06-30T00:00:00Z), or \"\" for never")
        else:
            out["expires_at"] = when
    return out


def _upsert(model: type[M], lookup: dict[str, Any], values: dict[str, Any]) -> tuple[M, bool, bool]:
    """``update_or_create`` that saves only a row that differs from ``values``: (row, created, changed).
    A second run of the same file writes nothing, so it bumps no configuration version either."""

    obj = model._default_manager.filter(**lookup).first()
    if obj is None:
        return model._default_manager.create(**lookup, **values), True, True
    changed = {name: value for name, value in values.items() if getattr(obj, name) != value}
    for name, value in changed.items():
        setattr(obj, name, value)
    if changed:
        obj.save(update_fields=list(changed))
    return obj, False, bool(changed)


def _usd(value: Any, where: str) -> Decimal | None:
    if value is None:
        return None
    try:
        usd = Decimal(str(value))
    except InvalidOperation:
        usd = Decimal(-1)
    if isinstance(value, bool) or not usd.is_finite() or usd < 0:
        raise ConfigError(f"{where}: must be a non-negative amount of USD")
    return usd


def _load_provider(p: dict[str, Any], where: str, report: LoadReport, reset_balances: bool) -> None:
    name = _require(p, "name", where)
    protocol = _require(p, "protocol", where)
    if protocol not in PROTOCOLS:
        raise ConfigError(f"{where}: protocol must be one of {', '.join(sorted(PROTOCOLS))}")
    defaults: dict[str, Any] = {"protocol": protocol, "base_url": _require(p, "base_url", where),
                                "served_models": list(p.get("models", []))}
    for key, kind in PROVIDER_FIELDS.items():
        if key in p:
            value = p[key]
            if kind is float and isinstance(value, int):
                value = float(value)
            if not isinstance(value, kind):
                raise ConfigError(f"{where}: '{key}' must be a {kind.__name__}")
            defaults[key] = value
    if "selection" in defaults and defaults["selection"] not in STRATEGIES:
        raise ConfigError(f"{where}: 'selection' must be one of {', '.join(STRATEGIES)}, "
                          f"not {str(defaults['selection'])[:40]!r}")
    if "affinity_ttl" in defaults and not defaults["affinity_ttl"] >= 1:
        raise ConfigError(f"{where}: 'affinity_ttl' must be at least 1 (seconds)")
    if "rules" in defaults and (problems := validate_rules(defaults["rules"])):
        raise ConfigError(f"{where}: " + "; ".join(problems))
    if "prices" in defaults and (problems := validate_prices(defaults["prices"])):
        raise ConfigError(f"{where}.prices: " + "; ".join(problems))
    provider, created, changed = _upsert(Provider, {"name": name}, defaults)
    report.count("providers", created, changed)
    for j, a in enumerate(p.get("accounts", [])):
        awhere = f"{where}.accounts[{j}]"
        label = _require(a, "label", awhere)
        secret = _require(a, "api_key", awhere)
        account = Account.objects.filter(provider=provider, label=label).first()
        created = account is None
        if account is None:
            account = Account(provider=provider, label=label)
        dirty: set[str] = set()
        if created or _secret_differs(account, secret):
            account.set_secret(secret)
            dirty |= {"secret_encrypted", "key_hint"}
        if "balance" in a and account.balance != (balance := Decimal(str(a["balance"]))):
            if opening_balance(account, reset_balances):
                account.balance = balance
                dirty.add("balance")
            else:
                report.balances_kept += 1
        for name in ("weight", "tier", "max_concurrent"):
            if name in a:
                value = a[name]
                if isinstance(value, bool) or not isinstance(value, int) or value < (1 if name != "weight" else 0):
                    if not (name == "max_concurrent" and value is None):
                        raise ConfigError(f"{awhere}: '{name}' must be a whole number"
                                          f"{' of 0 or more' if name == 'weight' else ' of 1 or more'}")
                if getattr(account, name) != value:
                    setattr(account, name, value)
                    dirty.add(name)
        if created:
            account.save()
        elif dirty:
            account.save(update_fields=sorted(dirty))
        report.count("accounts", created, bool(dirty))


def _secret_differs(account: Account, secret: str) -> bool:
    try:
        return account.get_secret() != secret
    except ValueError:
        return True  # encrypted under another key (SECRET_KEY changed): the file's key replaces it
