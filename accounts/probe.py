"""Send one minimal request through an account and report what happened (admin "test" action).

A success re-enables an account that the pool disabled (never one disabled by hand).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from translation import ir, registry, sse

from . import pool
from .models import Account
from .rules import classify

PROBE_TEXT = "Reply with the single word: pong"


@dataclass
class ProbeOutcome:
    ok: bool
    status: int | None
    summary: str


def probe_account(account: Account, timeout: float = 30.0) -> ProbeOutcome:
    provider = account.provider
    proto = registry.get(provider.protocol)
    model = (provider.served_models or ["probe"])[0]
    req = ir.Request(model=model, messages=[ir.Message("user", [ir.TextPart(PROBE_TEXT)])], max_tokens=16)
    body = proto.build_request(req, model, ir.UpstreamCaps())
    secret = account.get_secret()
    headers = {"content-type": "application/json", **{str(k): str(v) for k, v in (provider.headers or {}).items()}}
    if provider.protocol == "anthropic":
        headers.update({"x-api-key": secret, "anthropic-version": provider.anthropic_version})
    else:
        headers["authorization"] = f"Bearer {secret}"
    try:
        with httpx.Client(timeout=timeout, proxy=provider.proxy_url or None, trust_env=False) as client:
            resp = client.post(provider.base_url.rstrip("/") + proto.PATH, content=sse.dumps(body), headers=headers)
    except httpx.HTTPError as exc:
        return ProbeOutcome(False, None, f"network failure: {type(exc).__name__}")
    if resp.status_code >= 400:
        err = proto.parse_error(resp.status_code, resp.content)
        verdict = classify(provider.rules, resp.status_code, err.message)
        return ProbeOutcome(False, resp.status_code, f"HTTP {resp.status_code} ({verdict.tier or 'unclassified'}): "
                            + pool.redact(err.message, [secret])[:200])
    if account.status != Account.ACTIVE and not account.disabled_by_hand:
        pool.enable_account(account.pk, how="probe")
        return ProbeOutcome(True, resp.status_code, "OK — account re-enabled")
    return ProbeOutcome(True, resp.status_code, "OK")
