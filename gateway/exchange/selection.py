"""Picking an account for one attempt: candidates, the session's account, then the provider's strategy.

The rule (docs/DESIGN.md "Accounts and the pick"), on top of the pool's written spec
(``accounts.pickorder``, which both pools implement):

1. **Candidates**: the provider's accounts the pool finds usable (active, or its cool-down over),
   less those this request already tried, those whose last reported rate limits the request would
   overrun (``headroom``: its estimated input tokens, one request), and those at their concurrency
   cap (``Account.max_concurrent``, counted in this process).
2. **Affinity**: a request that belongs to a session (``session``) goes to the account that served
   the session — or, continuing a stored Responses answer, to the account that answered it — when
   that account is a candidate: the pool is asked to *prefer* it. Otherwise the strategy chooses,
   and the choice is remembered for the session (``affinity``) for as long as the provider keeps
   its prompt cache (``Provider.affinity_ttl``, sliding; longer when the request asks for a longer
   cache). A new session does not go to an account with little headroom left (under
   :data:`LOW_HEADROOM` of a limit) while another candidate has more: that account keeps what it
   has for the sessions it already serves.
3. **Strategy** among the candidates: least recently used, highest balance, weighted, or priority tiers.

What happened is written to the request's record: ``kept``, ``assigned`` or ``moved`` with the
reason of a move (:data:`REASONS`), and the signal that named the session. When nothing is left
and quota is what is missing, the client gets a 429 in its protocol's envelope with ``Retry-After``
at the soonest reset — no account that would certainly refuse is tried.

Cost on the request path: dictionary reads in this process (and, with ``REDIS_URL``, one ``GETEX``
for the session); ``make bench``'s agents section measures it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from accounts.headroom import Need

from ..errors import PoolQuotaExhausted
from .affinity import Affinity
from .headroom import HeadroomBook

if TYPE_CHECKING:
    from accounts.models import Account
    from accounts.pool import Pool

    from .exchange import Exchange

KEPT, ASSIGNED, MOVED = "kept", "assigned", "moved"
# Why a session left its account: its account was disabled, cooling down or removed; its rate
# limits would be overrun; it was at its concurrency cap; it failed this request's attempt.
UNAVAILABLE, QUOTA, BUSY, FAILED = "unavailable", "quota", "busy", "failed"
REASONS = (UNAVAILABLE, QUOTA, BUSY, FAILED)
LOW_HEADROOM = 0.2


class Selector:
    def __init__(self, pool: Pool, affinity: Affinity, headroom: HeadroomBook, quota: bool = True) -> None:
        """``quota``: leave out the accounts whose rate limits a request would overrun (off: blind to them,
        as the pool was before; ``GATEWAY_POOL_QUOTA``)."""

        self.pool = pool
        self.affinity = affinity
        self.headroom = headroom
        self.quota = quota
        self._in_flight: dict[int, int] = {}
        self._caps: dict[int, int] = {}  # concurrency caps, as the accounts picked so far had them

    async def pick(self, ex: Exchange, tried: Sequence[int]) -> Account | None:
        """The account for the next attempt of ``ex`` (held against its concurrency cap until released),
        or None when no account is left; :class:`PoolQuotaExhausted` when quota is what is missing."""

        provider = ex.route.provider
        session = ex.session if provider.affinity else None
        ttl = max(provider.affinity_ttl, session.cache_ttl or 0.0) if session is not None else 0.0
        preferred = None
        if session is not None:
            preferred = ex.previous_account
            if preferred is None:
                # A retry goes on from the account the first attempt chose (asked of the store once).
                preferred = ex.session_account if tried and ex.session_account is not None else \
                    await self.affinity.lookup(provider.id, session.digest, ttl)
            ex.session_account = preferred
        if self.quota and not self.headroom.asked(provider.id):
            await self.headroom.fetch(provider.id)
        # The request's estimate is made only when some account's limits are known.
        quota = self.quota and self.headroom.knows(provider.id)
        busy = {pk for pk, cap in self._caps.items() if self._in_flight.get(pk, 0) >= cap} if self._caps else set()
        account = None
        short: dict[int, float] | None = None
        if preferred is not None and preferred not in tried and preferred not in busy and not (
                quota and self.headroom.short_one(provider.id, preferred, ex.need)):
            # The common case, a session's next turn: its account can take it, so only that account's
            # limits are read (not every account's); the pool takes it unless it is out of the pool.
            account = await self._pick(ex, [*tried, *busy], preferred, busy)
            if account is not None and account.id != preferred and quota:
                short = self.headroom.short(provider.id, ex.need)
                if account.id in short:  # its account left the pool, and the strategy's choice is spent
                    self.release(account.id)
                    account = None
        if account is None:
            if short is None:
                short = self.headroom.short(provider.id, ex.need) if quota else {}
            exclude = {*tried, *short, *busy}
            if quota and (preferred is None or preferred in exclude):
                low = self._low(provider.id) - exclude
                if low:  # a new home for the session: not where headroom is running out, if anywhere else
                    account = await self._pick(ex, [*exclude, *low], None, busy)
            if account is None:
                account = await self._pick(ex, list(exclude), preferred, busy)
        if account is None:
            # Quota is what is missing when an account left out for it was not tried by this request
            # (one that was, and failed, failed for a reason of its own: the caller reports that).
            waiting = {pk: until for pk, until in (short or {}).items() if pk not in tried}
            if waiting:
                raise _exhausted(waiting)
            return None
        if quota:
            self.headroom.charge(provider.id, account.id, ex.need)
        if session is not None:
            await self._note(ex, account.id, preferred, tried, short, busy, ttl)
        return account

    async def _pick(self, ex: Exchange, exclude: list[int], prefer: int | None, busy: set[int]) -> Account | None:
        provider = ex.route.provider
        while True:
            account = await self.pool.pick(provider.id, exclude, provider.selection, prefer)
            if account is None:
                return None
            pk, cap = account.id, account.max_concurrent
            if cap is None:
                if self._caps:
                    self._caps.pop(pk, None)
            else:
                self._caps[pk] = cap
                if self._in_flight.get(pk, 0) >= cap:  # its cap learnt only now: pick again
                    busy.add(pk)
                    exclude.append(pk)
                    continue
            self._in_flight[pk] = self._in_flight.get(pk, 0) + 1
            return account

    def release(self, account_id: int) -> None:
        """An attempt on ``account_id`` has ended (answered, failed, or its stream closed)."""

        left = self._in_flight.get(account_id, 0) - 1
        if left > 0:
            self._in_flight[account_id] = left
        else:
            self._in_flight.pop(account_id, None)

    def in_flight(self, account_id: int) -> int:
        return self._in_flight.get(account_id, 0)

    def _low(self, provider_id: int) -> set[int]:
        """Accounts with under LOW_HEADROOM of some limit left (by their last report, reset not yet due)."""

        out = set()
        now = time.time()
        for account_id, headroom in self.headroom.accounts(provider_id):
            for limit in headroom.limits.values():
                if limit.limit and limit.reset_at > now and limit.remaining < LOW_HEADROOM * limit.limit:
                    out.add(account_id)
                    break
        return out

    async def _note(self, ex: Exchange, account_id: int, preferred: int | None, tried: Sequence[int],
                    short: dict[int, float] | None, busy: set[int], ttl: float) -> None:
        record, session = ex.record, ex.session
        assert session is not None
        record.session_signal = "previous_response_id" if ex.previous_account is not None else session.signal
        if preferred is None:
            record.affinity, record.affinity_reason = (record.affinity or ASSIGNED), ""
        elif account_id == preferred:
            record.affinity, record.affinity_reason = KEPT, ""
        else:
            reason = (FAILED if preferred in tried else QUOTA if short and preferred in short
                      else BUSY if preferred in busy else UNAVAILABLE)
            record.affinity, record.affinity_reason = MOVED, reason
        if account_id != preferred or ex.previous_account is not None:
            await self.affinity.remember(ex.route.provider.id, session.digest, account_id, ttl)
        ex.session_account = account_id


def _exhausted(short: dict[int, float]) -> PoolQuotaExhausted:
    wait = max(1, math.ceil(min(short.values()) - time.time()))
    return PoolQuotaExhausted(
        f"Every account of this model's provider has used up its rate limit; the soonest resets in {wait} s",
        headers={"Retry-After": str(wait)})


def need_of(input_tokens: int) -> Need:
    return Need(input_tokens=max(0, input_tokens))
