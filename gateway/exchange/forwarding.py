"""What of the client's request, besides its body, reaches the upstream: the one forwarding policy.

Headers are forwarded by name from an allow-list, so a client's credentials
(``Authorization``, ``x-api-key``), cookies and hop-by-hop headers never travel:

========================  ====================  ===========================================
client header             upstream protocols    when
========================  ====================  ===========================================
``anthropic-beta``        anthropic             same protocol: unchanged. Translated: the
                                                betas the built body relies on instead (a
                                                beta the client named is interpreted by the
                                                translation, not forwarded)
``anthropic-version``     anthropic             when the client sends one; else the
                                                provider's ``anthropic_version``
``openai-beta``           openai_chat,          always
                          responses
``x-codex-beta-features`` responses             same protocol (Codex's ``remote_compaction_v2``:
                                                the upstream then reads the compaction trigger)
========================  ====================  ===========================================

An upstream that refuses request tags (``Provider.accepts_request_tags`` off) gets neither the
body's ``tags`` nor the ``request-tags-2026-08-21`` value of ``anthropic-beta``: Bedrock, Vertex and
many compatible servers reject both, and they only label usage.

Query parameters: ``beta`` (Claude Code posts to ``/v1/messages?beta=true``) to an
Anthropic upstream on the same protocol; no other.

Each protocol module names what its upstreams are sent (``FORWARDED_HEADERS``, ``FORWARDED_QUERY`` and
``BETA_HEADER`` in ``translation.<protocol>``); the table above is what they say together.

A provider's own ``headers`` are applied last: they add or override any of these
(and the credential), and an empty value drops the header.

Back to the client, of the upstream's response headers only ``Retry-After`` on an error the
client gets (:func:`passed_back`), passthrough or not. Everything else stays behind: above all an
Anthropic upstream's ``anthropic-ratelimit-*`` (the pool's own quota, which a client would take
for its own: Claude Code shows ``anthropic-ratelimit-unified-*`` as the user's usage), OpenAI's
``x-ratelimit-*``, request ids and cookies. The caller's own standing is the gateway's to send
(``gateway.limits.standing``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode

from translation import registry


@dataclass(frozen=True)
class Forwarded:
    headers: dict[str, str] = field(default_factory=dict)
    query: str = ""  # without the "?"


REQUEST_TAGS_BETA = "request-tags-2026-08-21"


def forwarded(client_headers: Mapping[str, str], query: str, client: str, upstream: str,
              required_betas: Iterable[str] = (), request_tags: bool = True) -> Forwarded:
    """``client_headers`` are the request's (any case); ``required_betas`` are those a
    translated Anthropic body relies on; ``request_tags``: the upstream takes request tags."""

    same = client == upstream
    proto = registry.get(upstream)
    headers: dict[str, str] = {}
    for name, same_protocol_only in proto.FORWARDED_HEADERS.items():
        if same or not same_protocol_only:
            value = client_headers.get(name)
            if value and name == "anthropic-beta" and not request_tags and REQUEST_TAGS_BETA in value:
                value = ",".join(b for b in (v.strip() for v in value.split(",")) if b and b != REQUEST_TAGS_BETA)
            if value:
                headers[name] = value
    betas = list(dict.fromkeys(required_betas))
    if betas and proto.BETA_HEADER is not None and not same:
        headers[proto.BETA_HEADER] = ",".join(betas)
    query_rules = proto.FORWARDED_QUERY
    params = [(k, v) for k, v in (parse_qsl(query, keep_blank_values=True) if query else ())  # most calls have none
              if k in query_rules and (same or not query_rules[k])]
    return Forwarded(headers, urlencode(params))


PASSED_BACK = ("retry-after",)


def passed_back(upstream_headers: Mapping[str, str] | None) -> dict[str, str]:
    """Of an upstream's error answer's headers (any case), those its client gets."""

    if upstream_headers is None:
        return {}
    return {"Retry-After": value for name in PASSED_BACK if (value := upstream_headers.get(name))}


def apply_provider_headers(headers: dict[str, str], provider_headers: Mapping[str, str]) -> dict[str, str]:
    """The provider's headers over ``headers`` (names compared without case); an empty value drops one."""

    if not provider_headers:
        return headers
    overridden = {name.lower() for name in provider_headers}
    out = {k: v for k, v in headers.items() if k.lower() not in overridden}
    out.update((k, v) for k, v in provider_headers.items() if v != "")
    return out
