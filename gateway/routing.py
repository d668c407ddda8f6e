"""Model routing: what the client asked for → (provider, upstream model).

Order: exact aliases, glob aliases (by priority, then the most specific
pattern), a provider serving the name itself, ``provider/model`` prefixes, and
the legacy names of the SOP (re-resolved under their current name).
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from .errors import ModelNotFound, PermissionDenied
from .state import KeyInfo, ProviderInfo, Snapshot

# Legacy → current names (SOP "Model Name Mapping").
LEGACY_NAMES: dict[str, str] = {
    "claude-3-5-sonnet-20241022": "claude-sonnet-4-5",
    "claude-3-5-sonnet-latest": "claude-sonnet-4-5",
    "claude-3-opus-20240229": "claude-opus-4-6",
    "claude-3-opus-latest": "claude-opus-4-6",
}


@dataclass(frozen=True)
class Route:
    provider: ProviderInfo
    upstream_model: str


def _upstream_name(requested: str, configured: str) -> str:
    return requested if configured == "*" else configured


def resolve(model: str, snap: Snapshot) -> Route:
    route = _resolve(model, snap)
    if route is None and model in LEGACY_NAMES:
        route = _resolve(LEGACY_NAMES[model], snap)
    if route is None:
        raise ModelNotFound(f"The model '{model}' does not exist or is not served by this gateway", param="model")
    return route


def _resolve(model: str, snap: Snapshot) -> Route | None:
    for alias in snap.aliases:
        if not alias.is_glob and alias.pattern == model and alias.provider_id in snap.providers:
            return Route(snap.providers[alias.provider_id], _upstream_name(model, alias.upstream_model))
    globs = [a for a in snap.aliases if a.is_glob and a.provider_id in snap.providers and fnmatchcase(model, a.pattern)]
    if globs:
        best = max(globs, key=lambda a: (a.priority, len(a.pattern.replace("*", ""))))
        return Route(snap.providers[best.provider_id], _upstream_name(model, best.upstream_model))
    for provider in snap.providers.values():
        if model in provider.served_models:
            return Route(provider, model)
    prefix, sep, rest = model.partition("/")
    if sep:
        for provider in snap.providers.values():
            if provider.name == prefix:
                return Route(provider, rest)
    return None


def check_allowed(key: KeyInfo, model: str) -> None:
    if key.allowed_models and not any(fnmatchcase(model, pat) for pat in key.allowed_models):
        raise PermissionDenied(f"This API key is not allowed to use the model '{model}'", param="model")


def listed_models(snap: Snapshot) -> list[tuple[str, str]]:
    """(model id, owner) for /v1/models: served models and non-glob aliases, de-duplicated."""

    seen: dict[str, str] = {}
    for provider in snap.providers.values():
        for name in provider.served_models:
            seen.setdefault(name, provider.name)
    for alias in snap.aliases:
        if not alias.is_glob and alias.provider_id in snap.providers:
            seen.setdefault(alias.pattern, snap.providers[alias.provider_id].name)
    return sorted(seen.items())
