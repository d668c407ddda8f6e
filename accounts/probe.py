"""Send one minimal request through an account and report what happened (admin "test" action).

A success re-enables an account that the pool disabled (never one disabled by hand).
Sending does no database work, so the admin can probe several accounts at once
from worker threads and apply the outcomes afterwards in its own.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from translation import ir, registry, sse

from . import pool
from .models import Account, ModelAlias, Provider
from .rules import classify

PROBE_TEXT = "Reply with the single word: pong"
PARALLEL = 8


@dataclass
class ProbeOutcome:
    ok: bool
    status: int | None
    summary: str


def probe_model(provider: Provider) -> str:
    """A model the provider really serves: its first served model, else an alias's target."""

    if provider.served_models:
        return str(provider.served_models[0])
    alias = (ModelAlias.objects.filter(provider=provider).exclude(upstream_model="*")
             .order_by("-priority", "id").first())
    return alias.upstream_model if alias else "probe"


def send_probe(account: Account, model: str, timeout: float = 15.0) -> ProbeOutcome:
    provider = account.provider
    proto = registry.get(provider.protocol)
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
    err: ir.Error | None
    if resp.status_code >= 400:
        err = proto.parse_error(resp.status_code, resp.content)
    else:
        try:
            err = proto.parse_response(sse.loads(resp.content)).error
        except (ValueError, ir.DecodeError):
            return ProbeOutcome(False, resp.status_code, f"HTTP {resp.status_code} with a malformed body")
    if err is not None:
        verdict = classify(provider.rules, err.status, err.message)
        return ProbeOutcome(False, err.status, f"HTTP {err.status} ({verdict.tier or 'unclassified'}): "
                            + pool.redact(err.message, [secret], limit=200))
    return ProbeOutcome(True, resp.status_code, "OK")


def apply_outcome(account: Account, outcome: ProbeOutcome) -> ProbeOutcome:
    """A successful probe puts a pool-disabled account back; one disabled by hand stays out."""

    if not outcome.ok or account.status == Account.ACTIVE:
        return outcome
    if account.disabled_by_hand:
        return ProbeOutcome(True, outcome.status, "OK — left disabled: it was disabled by hand")
    if pool.enable_account(account.pk, how="probe"):
        return ProbeOutcome(True, outcome.status, "OK — account re-enabled")
    return outcome


def probe_account(account: Account, timeout: float = 15.0) -> ProbeOutcome:
    return apply_outcome(account, send_probe(account, probe_model(account.provider), timeout))


def probe_accounts(accounts: list[Account], timeout: float = 15.0) -> list[ProbeOutcome]:
    """Probe several accounts concurrently; outcomes in the same order."""

    models = {a.provider_id: probe_model(a.provider) for a in accounts}
    with ThreadPoolExecutor(max_workers=min(PARALLEL, max(len(accounts), 1))) as workers:
        sent = list(workers.map(lambda a: send_probe(a, models[a.provider_id], timeout), accounts))
    return [apply_outcome(a, o) for a, o in zip(accounts, sent)]
