"""The dispatch loop: pick an account, call the upstream, classify, retry — one loop for all nine paths.

When client and upstream speak the same protocol the exchange is a passthrough:
the client's body goes up (model replaced), and the upstream's JSON, SSE events
and error bodies come back as they are (``translation.passthrough`` says what
the one rewrite is), while a tap — the same decoder — reads usage, finish and
errors beside them. Otherwise both directions are translated through the IR.

Retrying is possible until the first byte has gone to the client. A streaming
upstream is therefore read until its first content event before the response
is committed; an error before that (HTTP status, in-stream error event,
network failure, silence past the idle timeout) is classified exactly like a
non-2xx answer. After the commit, a failure ends the stream cleanly in the
client's protocol (the encoder's error ending).

This module is the loop over the accounts; what an attempt's answer becomes is the JSON answer's
(``gateway.exchange.answer``) or the stream writer's (``gateway.exchange.streamwriter``), and a failed
attempt is judged in ``gateway.exchange.judge``.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any

from accounts.outcomes import Verdict
from translation import ir, registry, sse
from translation.protocol import ProtocolModule

from ..edge.responses import ApiResponse
from ..errors import (
    InvalidRequest,
    NestingTooDeep,
    NoAccounts,
    UpstreamFailed,
    UpstreamUnavailable,
)
from ..log.record import Attempt
from .answer import json_answer
from .exchange import Exchange
from .forwarding import Forwarded, forwarded
from .judge import Retry, error_body, judge
from .neterrors import NetworkFailure, client_message, failure_kind, trace_text
from .session import Session
from .streamwriter import open_stream
from .upstream import NETWORK_ERRORS, UpstreamTarget

if TYPE_CHECKING:
    from ..app import Gateway


def upstream_request(ex: Exchange, proto: ProtocolModule, account_id: int = 0) -> tuple[bytes, Forwarded]:
    """The upstream's body, and the headers and query string that go with it; ``account_id``: the
    account it goes to, which matters only to a passthrough that continues a stored conversation."""

    provider, model = ex.route.provider, ex.route.upstream_model
    if ex.passthrough:
        # Same protocol: the client's own body, so fields we don't model still reach the upstream.
        client_body = ex.body
        if ex.previous is not None:
            client_body = ex.previous.passthrough_body(ex.body, provider.id, account_id)
        body = proto.passthrough_request(client_body, model, provider.caps)
        betas: list[str] = []
    else:
        try:
            body = proto.build_request(ex.request, model, provider.caps)
        except ir.InvalidRequest as exc:  # something the upstream's protocol cannot carry
            raise InvalidRequest(exc.message, exc.param) from exc
        betas = proto.required_betas(body)
        cache_key(body, proto, ex.session)
    fwd = forwarded(ex.headers, ex.query, ex.client.NAME, provider.protocol, betas, provider.caps.request_tags)
    try:
        return sse.dumps(body).encode(), fwd
    except TypeError as exc:
        # Refused here, where the body is serialised anyway, not by a second dump of every body.
        raise NestingTooDeep from exc


def cache_key(body: dict[str, Any], upstream: ProtocolModule, session: Session | None) -> None:
    """A translated request to an upstream that routes its prompt cache by a request field (OpenAI's
    ``prompt_cache_key``) carries its session there (a Claude Code conversation has its turns cached
    together, as Codex's are): the session's digest, never the client's own id. A key the client set
    itself is kept."""

    field = upstream.CACHE_KEY_FIELD
    if session is not None and field is not None and not body.get(field):
        body[field] = session.hex


async def dispatch(gw: Gateway, ex: Exchange) -> ApiResponse:
    provider = ex.route.provider
    proto = registry.get(provider.protocol)
    body, fwd = upstream_request(ex, proto)
    per_account = ex.passthrough and ex.previous is not None  # the previous response's account gets its id
    tried: list[int] = []
    last_network_error: NetworkFailure | None = None
    last_failure: UpstreamFailed | None = None
    ex.let_go()  # a slot an earlier dispatch of this exchange held (compaction's summary first)
    for _ in range(gw.options.max_attempts):
        account = await gw.selector.pick(ex, tried)
        if account is None:
            break
        ex.release = functools.partial(gw.selector.release, account.pk)
        tried.append(account.pk)
        ex.record.account_id = account.pk
        if per_account:
            body, fwd = upstream_request(ex, proto, account.pk)
        secret = account.get_secret()
        attempt = Attempt(account.pk, account.label, None, Verdict.OK, 0)
        ex.record.attempts.append(attempt)
        t0 = time.monotonic()
        try:
            return await _attempt(gw, ex, proto, UpstreamTarget(provider, secret, ex.upstream_path or proto.PATH, fwd),
                                  body, attempt, secret)
        except Retry as retry:
            ex.let_go()
            last_network_error, last_failure = retry.unreachable, retry.failure
            continue
        finally:
            attempt.latency_ms = int((time.monotonic() - t0) * 1000)
    if last_network_error is not None:
        # Only the kind: aiohttp's text names the upstream's host and port, which the client must not learn.
        raise UpstreamUnavailable(client_message(last_network_error))
    if last_failure is not None and last_failure.upstream_status >= 500:
        # The upstream itself failing (a 5xx, Anthropic's 529 overloaded) on the last account tried:
        # the client hears what it said, as before such answers were retried, not "no accounts".
        raise last_failure
    raise NoAccounts("No active upstream accounts are available for this model; try again later")


async def _attempt(gw: Gateway, ex: Exchange, proto: ProtocolModule, target: UpstreamTarget, body: bytes,
                   attempt: Attempt, secret: str) -> ApiResponse:
    provider = target.provider
    try:
        response = await gw.upstream.send(target, body)
    except NETWORK_ERRORS as exc:
        attempt.verdict, attempt.error = Verdict.NETWORK, trace_text(exc, [secret])
        raise Retry(failure_kind(exc)) from exc
    attempt.status = response.status_code
    gw.selector.headroom.observe(provider.id, attempt.account_id or 0, response.status_code, response.headers)
    if response.status_code >= 400:
        raw = await error_body(response, provider.first_byte_timeout)
        err = proto.parse_error(response.status_code, raw)
        await judge(gw, ex, attempt, err, raw.decode("utf-8", "replace"), secret, response.headers,
                    raw if ex.passthrough else None)
    if ex.request.stream:
        return await open_stream(gw, ex, proto, response, attempt, secret)
    return await json_answer(gw, ex, proto, response, attempt, secret)
