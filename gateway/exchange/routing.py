"""Model routing: what the client asked for → (provider, upstream model).

Order: an exact alias of the name asked for; then the name — renamed first when
it is one of the SOP's legacy names — through exact aliases, glob aliases (by
priority, then the most specific pattern), a provider serving the name itself,
and ``provider/model`` prefixes. A provider with ``auto_prefix`` (an upstream
such as OpenRouter that wants ``anthropic/claude-…``) gets the SOP's vendor
prefix on whatever upstream name the route ends with; a name asked for with
that prefix and not routed as such is routed as its short name.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from ..errors import ModelDenied, ModelNotFound
from ..state import AliasInfo, KeyInfo, ProviderInfo, Snapshot

# Legacy → current names (SOP "Model Name Mapping").
LEGACY_NAMES: dict[str, str] = {
    "claude-3-5-sonnet-20241022": "claude-sonnet-4-5",
    "claude-3-5-sonnet-latest": "claude-sonnet-4-5",
    "claude-3-opus-20240229": "claude-opus-4-6",
    "claude-3-opus-latest": "claude-opus-4-6",
}


# Vendor prefixes by name pattern (SOP "Auto-prefix by pattern"), for auto_prefix providers.
AUTO_PREFIXES: tuple[tuple[str, str], ...] = (
    ("claude-*", "anthropic/"),
    ("gpt-*", "openai/"),
    ("gemini-*", "google/"),
    ("grok-*", "xai/"),
)


@dataclass(frozen=True)
class Route:
    provider: ProviderInfo
    upstream_model: str


def vendor_prefixed(model: str) -> str:
    """``claude-sonnet-4-6`` → ``anthropic/claude-sonnet-4-6``; names already prefixed or unknown unchanged."""

    if "/" in model:
        return model
    for pattern, prefix in AUTO_PREFIXES:
        if fnmatchcase(model, pattern):
            return prefix + model
    return model


def _route(provider: ProviderInfo, upstream_model: str) -> Route:
    return Route(provider, vendor_prefixed(upstream_model) if provider.auto_prefix else upstream_model)


def _upstream_name(requested: str, configured: str) -> str:
    return requested if configured == "*" else configured


def without_vendor(model: str) -> str | None:
    """``anthropic/claude-sonnet-4-6`` → ``claude-sonnet-4-6``: the short name of an SOP-prefixed one."""

    for pattern, prefix in AUTO_PREFIXES:
        if model.startswith(prefix) and fnmatchcase(model[len(prefix):], pattern):
            return model[len(prefix):]
    return None


ROUTES_HELD = 4096  # names remembered per configuration; clients may send any name, so it starts over past this


def resolve(model: str, snap: Snapshot) -> Route:
    try:
        route: Route | None = snap.routes[model]
    except KeyError:
        route = _routed(model, snap)
        if len(snap.routes) >= ROUTES_HELD:
            snap.routes.clear()
        snap.routes[model] = route
    if route is None:
        raise ModelNotFound(f"The model '{shown(model)}' does not exist or is not served by this gateway",
                            param="model")
    return route


def _routed(model: str, snap: Snapshot) -> Route | None:
    # An alias ops wrote for this exact name beats the legacy table; otherwise a legacy
    # name is renamed before any glob can send it upstream under its retired name.
    route = _exact_alias(model, snap) or _resolve(LEGACY_NAMES.get(model, model), snap)
    if route is None and (short := without_vendor(model)) is not None:
        # Vendor-prefixed names route like the short ones (auto-prefix providers get the prefix back).
        route = _exact_alias(short, snap) or _resolve(LEGACY_NAMES.get(short, short), snap)
    return route


def _exact(model: str, snap: Snapshot) -> AliasInfo | None:
    for alias in snap.aliases:  # ordered by priority, highest first
        if not alias.is_glob and alias.pattern == model and alias.provider_id in snap.providers:
            return alias
    return None


def _best_glob(model: str, snap: Snapshot) -> AliasInfo | None:
    globs = [a for a in snap.aliases if a.is_glob and a.provider_id in snap.providers and fnmatchcase(model, a.pattern)]
    # Priority first; among equals the pattern with the most literal characters is the most specific.
    return max(globs, key=lambda a: (a.priority, len(a.pattern) - sum(a.pattern.count(c) for c in "*?")),
               default=None)


def alias_for(model: str, snap: Snapshot) -> AliasInfo | None:
    """The alias that routes ``model`` as asked (an exact one, else the best glob), if any."""

    return _exact(model, snap) or _best_glob(model, snap)


def _via(alias: AliasInfo | None, model: str, snap: Snapshot) -> Route | None:
    if alias is None:
        return None
    return _route(snap.providers[alias.provider_id], _upstream_name(model, alias.upstream_model))


def _exact_alias(model: str, snap: Snapshot) -> Route | None:
    return _via(_exact(model, snap), model, snap)


def _resolve(model: str, snap: Snapshot) -> Route | None:
    route = _via(alias_for(model, snap), model, snap)
    if route is not None:
        return route
    for provider in snap.providers.values():
        if model in provider.served_models:
            return Route(provider, model)
        if provider.auto_prefix and vendor_prefixed(model) in provider.served_models:
            return Route(provider, vendor_prefixed(model))
    prefix, sep, rest = model.partition("/")
    if sep:
        for provider in snap.providers.values():
            if provider.name == prefix:
                return _route(provider, rest)
    return None


def pattern_matches(pattern: str, model: str) -> bool:
    """A key's model pattern against a model name, ``/`` by ``/``.

    fnmatch's ``*`` matches ``/``, so ``acc-*`` admitted ``acc-chat/anything``: every
    ``provider/model`` route of a provider whose name fits. Here a wildcard (``*``,
    ``?``, ``[...]``) stays within its segment, and a name with ``/`` matches only a
    pattern with as many: ``acc-chat/*`` for the routes of provider ``acc-chat``.
    (Alias patterns keep fnmatch's rule: they choose where a name goes, not whether a
    key may ask for it, and a catch-all ``*`` alias to a vendor-prefixing upstream
    is meant to take ``anthropic/claude-…`` too.)
    """

    names, patterns = model.split("/"), pattern.split("/")
    return len(names) == len(patterns) and all(fnmatchcase(n, p) for n, p in zip(names, patterns))


def allows(patterns: tuple[str, ...], model: str) -> bool:
    """Does a model list (empty: every model) allow ``model``?"""

    return not patterns or any(pattern_matches(p, model) for p in patterns)


def may_use(key: KeyInfo, model: str) -> bool:
    """Do the key's model list and its team's (each empty: every model) both allow ``model``? The one
    check for every path."""

    return allows(key.allowed_models, model) and (key.team is None or allows(key.team.allowed_models, model))


def check_allowed(key: KeyInfo, model: str) -> None:
    if not allows(key.allowed_models, model):
        raise ModelDenied(f"This API key is not allowed to use the model '{shown(model)}'", param="model")
    if not may_use(key, model):
        raise ModelDenied(f"This API key's team is not allowed to use the model '{shown(model)}'", param="model")


def shown(model: str, limit: int = 200) -> str:
    """A model name as an error message may echo it: a megabyte of name is not repeated back."""

    return model if len(model) <= limit else model[:limit] + "…"
