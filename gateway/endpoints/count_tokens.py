"""POST /v1/messages/count_tokens: the upstream's own count when it is Anthropic, else an estimate.

An Anthropic provider counts exactly (its tokenizer, its fixed prompts, its
image and PDF rules), so the client's body goes there as the same-protocol
passthrough sends it (model renamed, what the provider's caps forbid removed)
and its answer comes back unchanged. Whatever is the upstream's or the
account's trouble and not the client's (a network failure, a 5xx, a 401, 403
or 429 on the account, an account-less pool, an answer that is no count)
falls back to the local estimate (``gateway.limits.tokens``): a count is advice, and
an estimate beats an error. Other 4xx answers (a bad body, an unknown model)
are the client's, returned in the Anthropic envelope with their status.

Several Anthropic-compatible providers have no count_tokens: they answer 404, 405 or 501. That is
the provider's lack, not the client's fault: the estimate answers, and :class:`gateway.exchange.nocount.NoCountEndpoint`
remembers the provider (by its id and base URL) for :data:`REMEMBER_MISSING` seconds, so the
next counts are estimated without asking. A 404 that names the model (Anthropic's answer to an
unknown model) is the client's and goes back to it.

Nothing here disables or cools down an account: that is the dispatch loop's
judgement on real traffic, not on a count.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any


from accounts.db import DatabaseUnavailable
from translation import ir, registry, sse
from translation.protocol import ProtocolModule

from ..edge.responses import ApiResponse, json_response, raw_json_response
from ..errors import InvalidRequest, NestingTooDeep, UpstreamFailed, passable, upstream_message
from ..exchange.forwarding import Forwarded, forwarded
from ..exchange.nocount import REMEMBER_MISSING
from ..exchange.routing import Route, check_allowed, resolve
from ..exchange.upstream import NETWORK_ERRORS, UpstreamTarget
from ..limits.tokens import estimate_input_tokens
from ..state import KeyInfo, Snapshot

if TYPE_CHECKING:
    from ..app import Gateway

log = logging.getLogger(__name__)

# The account's trouble, not the body's: another time (or the estimate) will do.
ACCOUNT_STATUSES = frozenset({401, 403, 429})
# The provider has no such endpoint (a 404 naming the model is the client's, see _no_endpoint).
MISSING_STATUSES = frozenset({404, 405, 501})
async def count_input_tokens(gw: Gateway, body: dict[str, Any], key: KeyInfo, snap: Snapshot,
                             client_headers: Mapping[str, str], query: str) -> ApiResponse:
    proto = registry.get("anthropic")
    try:
        # count_tokens takes a Messages body without max_tokens.
        req = proto.parse_request({"max_tokens": 1, **body})
    except ir.InvalidRequest as exc:
        raise InvalidRequest(exc.message, exc.param) from exc
    check_allowed(key, req.model)
    route = resolve(req.model, snap)
    upstream = registry.get(route.provider.protocol)
    # Only an upstream of the client's own protocol can count the client's own body.
    if upstream is proto and proto.COUNT_TOKENS_PATH is not None and not gw.no_count_endpoint.knows(route.provider):
        fwd = forwarded(client_headers, query, proto.NAME, route.provider.protocol,
                        request_tags=route.provider.caps.request_tags)
        answer = await _ask_upstream(gw, body, route, fwd)
        if answer is not None:
            return answer
    return json_response({"input_tokens": estimate_input_tokens(body)})


async def _ask_upstream(gw: Gateway, body: dict[str, Any], route: Route, fwd: Forwarded) -> ApiResponse | None:
    """The upstream's answer to pass on, or None to estimate instead."""

    provider = route.provider
    proto = registry.get(provider.protocol)
    try:
        out = sse.dumps(proto.passthrough_request(body, route.upstream_model, provider.caps)).encode()
    except TypeError as exc:
        raise NestingTooDeep from exc
    try:
        account = await gw.pool.pick(provider.id, [], provider.selection)
    except DatabaseUnavailable:
        return None
    if account is None:
        return None
    secret = account.get_secret()
    try:
        status, raw = await gw.upstream.post_read(
            UpstreamTarget(provider, secret, proto.COUNT_TOKENS_PATH or "", fwd), out)
    except NETWORK_ERRORS as exc:
        log.warning("count_tokens on provider %s failed (%s); estimating", provider.name, type(exc).__name__)
        return None
    if 200 <= status < 300 and _is_count(raw):
        return raw_json_response(raw, status)
    if status in MISSING_STATUSES and _no_endpoint(proto, status, raw):
        gw.no_count_endpoint.note(provider)
        log.warning("provider %s has no count_tokens (HTTP %s); estimating for the next %.0f s",
                    provider.name, status, REMEMBER_MISSING)
        return None
    if 400 <= status < 500 and status not in ACCOUNT_STATUSES:
        err = proto.parse_error(status, raw)
        message = upstream_message(err.message, secret, raw.decode("utf-8", "replace"), status)
        raise UpstreamFailed(status, message, err.error_type, raw=passable(raw, secret))
    log.warning("count_tokens on provider %s answered %s; estimating", provider.name, status)
    return None


def _no_endpoint(proto: ProtocolModule, status: int, raw: bytes) -> bool:
    """405 and 501 say the endpoint is missing; a 404 does unless it names the model (Anthropic's
    ``not_found_error`` for an unknown model, which the client must see)."""

    if status != 404:
        return True
    return "model" not in proto.parse_error(status, raw).message.lower()


def _is_count(raw: bytes) -> bool:
    try:
        answer = sse.loads(raw)
    except ValueError:
        return False
    return isinstance(answer, dict) and isinstance(answer.get("input_tokens"), int)
