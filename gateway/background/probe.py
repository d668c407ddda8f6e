"""Send one minimal request through an account and report what happened (the admin's Test action,
run in the background by :mod:`gateway.background.prober`).

The request goes out as real traffic does: through the app's upstream client,
with the account's credential and the provider's headers in the one header
builder (``gateway.exchange.upstream``), and a body built for the provider's capabilities.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace

from accounts.rules import classify
from translation import ir, registry, sse

from ..errors import upstream_message
from ..exchange.neterrors import trace_text
from ..exchange.upstream import NETWORK_ERRORS, UpstreamClient, UpstreamTarget
from ..state import ProviderInfo

PROBE_TEXT = "Reply with the single word: pong"
TIMEOUT = 15.0


@dataclass(frozen=True)
class ProbeOutcome:
    ok: bool
    status: int | None
    summary: str
    latency_ms: int | None = None  # from sending to the whole answer read; None: not sent


async def send_probe(upstream: UpstreamClient, provider: ProviderInfo, secret: str, model: str,
                     timeout: float = TIMEOUT) -> ProbeOutcome:
    started = time.monotonic()
    outcome = await _send(upstream, provider, secret, model, timeout)
    return replace(outcome, latency_ms=round((time.monotonic() - started) * 1000))


async def _send(upstream: UpstreamClient, provider: ProviderInfo, secret: str, model: str,
                timeout: float) -> ProbeOutcome:
    proto = registry.get(provider.protocol)
    req = ir.Request(model=model, messages=[ir.Message("user", [ir.TextPart(PROBE_TEXT)])], max_tokens=16)
    body = sse.dumps(proto.build_request(req, model, provider.caps)).encode()
    try:
        async with asyncio.timeout(timeout):
            response = await upstream.send(UpstreamTarget(provider, secret, proto.PATH), body)
            try:
                raw = await response.aread()
            finally:
                await response.aclose()
    except NETWORK_ERRORS as exc:
        # For ops (the admin shows it): what failed and where, with anything secret-shaped removed.
        return ProbeOutcome(False, None, f"network failure: {trace_text(exc, [secret])}")
    status = response.status_code
    err: ir.Error | None
    if status >= 400:
        err = proto.parse_error(status, raw)
    else:
        try:
            err = proto.parse_response(sse.loads(raw)).error
        except (ValueError, ir.DecodeError):
            return ProbeOutcome(False, status, f"HTTP {status} with a malformed body")
    if err is not None:
        ruling = classify(provider.rules, err.status, err.message)
        return ProbeOutcome(False, err.status, f"HTTP {err.status} ({ruling.tier or 'unclassified'}): "
                            + upstream_message(err.message, secret)[:200])
    return ProbeOutcome(True, status, "OK")
