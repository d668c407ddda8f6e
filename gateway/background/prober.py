"""Account tests run in the background: ops ask for them in the admin, a gateway process runs them.

The admin's Test action only marks the accounts (``probe_requested_at``), for any
number of them; every gateway process looks for marked accounts every
``GATEWAY_PROBE_INTERVAL`` seconds, claims a batch (each account is claimed by
exactly one process: the claim clears the mark in one transaction, rows another
process holds locked are skipped) and sends each a minimal request through the
app's upstream client (:mod:`gateway.background.probe`). The outcome is stored on the
account (``probed_at``, ``probe_ok``, ``probe_summary``); a success puts an
account the pool had disabled back into the pool, with its event closed as
ended by the probe. An account disabled by hand stays out.

Scheduled tests of accounts the pool disabled (``accounts.retests``) come through
the same queue: the pool's leader (``gateway.background.poolhealth``) marks them when due
and wakes its own process's prober rather than leave them to the next look.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts import pool
from accounts.db import hop
from accounts.models import Account, ModelAlias, Provider

from ..exchange.upstream import UpstreamClient
from ..state import SnapshotCache
from .probe import ProbeOutcome, send_probe

log = logging.getLogger(__name__)

BATCH = 50
PARALLEL = 8


@dataclass(frozen=True)
class Claimed:
    account_id: int
    provider_id: int
    secret: str
    model: str


def probe_model(provider: Provider) -> str:
    """A model the provider really serves: its first served model, else an alias's target."""

    if provider.served_models:
        return str(provider.served_models[0])
    alias = (ModelAlias.objects.filter(provider=provider).exclude(upstream_model="*")
             .order_by("-priority", "id").first())
    return alias.upstream_model if alias else "probe"


def claim(limit: int = BATCH) -> list[Claimed]:
    """Take up to ``limit`` requested tests, oldest first; nobody else will run them."""

    with transaction.atomic():
        ids = list(Account.objects.filter(probe_requested_at__isnull=False).order_by("probe_requested_at", "id")
                   .select_for_update(skip_locked=True).values_list("pk", flat=True)[:limit])
        Account.objects.filter(pk__in=ids).update(probe_requested_at=None)
    models: dict[int, str] = {}
    claimed = []
    for account in Account.objects.filter(pk__in=ids).select_related("provider").order_by("id"):
        if account.provider_id not in models:
            models[account.provider_id] = probe_model(account.provider)
        claimed.append(Claimed(account.pk, account.provider_id, account.get_secret(), models[account.provider_id]))
    return claimed


def claim_one(account_id: int) -> Claimed | None:
    """What a test of this account now needs (a test asked for from a page: no queue to claim from)."""

    account = Account.objects.filter(pk=account_id).select_related("provider").first()
    if account is None:
        return None
    return Claimed(account.pk, account.provider_id, account.get_secret(), probe_model(account.provider))


def record(account_id: int, outcome: ProbeOutcome) -> ProbeOutcome:
    """Store the outcome on the account; a success puts a pool-disabled account back."""

    account = Account.objects.filter(pk=account_id).first()
    if account is None:
        return outcome
    if outcome.ok and account.status != Account.ACTIVE:
        if account.disabled_by_hand:
            outcome = replace(outcome, summary="OK — left disabled: it was disabled by hand")
        elif pool.enable_account(account_id, how="probe"):
            outcome = replace(outcome, summary="OK — account re-enabled")
    Account.objects.filter(pk=account_id).update(probed_at=timezone.now(), probe_ok=outcome.ok,
                                                 probe_summary=outcome.summary[:300])
    return outcome


class Prober:
    def __init__(self, config: SnapshotCache, upstream: UpstreamClient, interval: float) -> None:
        self._config = config
        self._upstream = upstream
        self.interval = interval
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Look for requested tests now, not at the next interval."""

        self._wake.set()

    async def run(self) -> None:
        """Until cancelled: every ``interval`` seconds, the requested tests."""

        while True:
            try:
                while await self.run_once() == BATCH:
                    pass  # more waiting: no pause between full batches
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the loop must outlive a bad round (the database away)
                log.warning("account tests failed this round; will try again", exc_info=True)
            try:
                await asyncio.wait_for(self._wake.wait(), self.interval)
            except TimeoutError:
                pass
            self._wake.clear()

    async def run_once(self) -> int:
        """Run the tests requested so far (one batch); returns how many ran."""

        claimed = await hop(claim)
        if not claimed:
            return 0
        limit = asyncio.Semaphore(PARALLEL)

        async def one(c: Claimed) -> None:
            async with limit:
                await self._test(c)

        await asyncio.gather(*(one(c) for c in claimed))
        return len(claimed)

    async def test_now(self, sender: Any = None, *, account_id: int, **kwargs: Any) -> ProbeOutcome:
        """Test one account at once and answer how it went (``accounts.testnow.test_requested``:
        the dashboard's Test now button), recorded as a background test is."""

        claimed = await hop(claim_one, account_id)
        if claimed is None:
            return ProbeOutcome(False, None, "not tested: no such account")
        return await self._test(claimed)

    async def _test(self, c: Claimed) -> ProbeOutcome:
        provider = (await self._config.get()).providers.get(c.provider_id)
        if provider is None:
            outcome = ProbeOutcome(False, None, "not tested: its provider is disabled")
        else:
            outcome = await send_probe(self._upstream, provider, c.secret, c.model)
        return await hop(record, c.account_id, outcome)
