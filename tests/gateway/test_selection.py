"""Picking with sessions and rate limits (gateway.exchange.selection) over a pool that follows the written spec.

``SpecPool`` picks by ``accounts.pickorder`` itself (what both real pools are held to by
tests/accounts/test_pickorder.py), over unsaved accounts, so these tests are about what the
selector adds: the candidates it leaves out, the session's account it prefers, what it records.
"""

from __future__ import annotations

import datetime as dt
import itertools
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import given, settings
from hypothesis import strategies as st

from accounts import pickorder
from accounts.models import Account
from gateway.errors import PoolQuotaExhausted
from gateway.exchange.affinity import Affinity, MemoryAffinity
from gateway.exchange.dispatch import dispatch
from gateway.exchange.exchange import Exchange
from gateway.exchange.headroom import HeadroomBook
from gateway.exchange.selection import ASSIGNED, BUSY, FAILED, KEPT, MOVED, QUOTA, UNAVAILABLE, Selector
from gateway.exchange.session import Session

from .fakes import account, chat_answer, chat_body, exchange, json_reply, provider, rig, run, snapshot

PROVIDER = provider(1)
EXHAUSTED = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "30s",
             "x-ratelimit-limit-requests": "10"}


class SpecPool:
    """accounts.pool.Pool by the written spec, in memory, over unsaved accounts."""

    def __init__(self, accounts: Sequence[Account]) -> None:
        self.accounts = list(accounts)
        self._tick = itertools.count(1)

    async def pick(self, provider_id: int, exclude: Sequence[int], strategy: str,
                   prefer: int | None = None) -> Account | None:
        now = timezone.now()
        usable = [a for a in self.accounts if a.provider_id == provider_id and a.pk not in exclude
                  and pickorder.usable(a.status, a.cooldown_until, now)]
        if not usable:
            return None
        best = min(usable, key=lambda a: pickorder.sort_key(strategy, a.balance, a.last_used_at, a.pk, prefer=prefer,
                                                            tier=a.tier, weight=a.weight, due=a.pick_due))
        best.last_used_at = now + dt.timedelta(microseconds=next(self._tick))
        return best


def accounts(n: int) -> list[Account]:
    return [account(pk, f"sk-unit-{pk}") for pk in range(1, n + 1)]


def session(n: int) -> Session:
    return Session(n.to_bytes(16, "big"), "prompt_cache_key")


def ask(sess: Session | None, **body: Any) -> Exchange:
    ex = exchange("openai_chat", {**chat_body(), **body}, PROVIDER)
    ex.session = sess
    return ex


def selector(pool_accounts: Sequence[Account]) -> Selector:
    return Selector(SpecPool(pool_accounts), Affinity(), HeadroomBook())  # type: ignore[arg-type]


account_state = st.fixed_dictionaries({
    "status": st.sampled_from([pickorder.ACTIVE, pickorder.ACTIVE, pickorder.COOLING, pickorder.DISABLED]),
    "cooldown_over": st.booleans(),
    "out_of_quota": st.booleans(),
    "at_cap": st.booleans(),
})


@settings(max_examples=200, deadline=None)
@given(states=st.lists(account_state, min_size=1, max_size=8),
       remembered=st.dictionaries(st.integers(0, 5), st.integers(1, 8), max_size=6),
       requests=st.lists(st.integers(0, 5), min_size=1, max_size=20))
def test_affinity_never_picks_an_account_that_cannot_serve(states: list[dict[str, Any]], remembered: dict[int, int],
                                                           requests: list[int]) -> None:
    pool_accounts = accounts(len(states))
    now = timezone.now()
    sel = selector(pool_accounts)
    cannot: set[int] = set()
    for acc, state in zip(pool_accounts, states):
        acc.status = state["status"]
        acc.cooldown_until = now + dt.timedelta(minutes=-1 if state["cooldown_over"] else 1)
        if not pickorder.usable(acc.status, acc.cooldown_until, now):
            cannot.add(acc.pk)
        if state["out_of_quota"]:
            sel.headroom.observe(PROVIDER.id, acc.pk, 200, EXHAUSTED)
            cannot.add(acc.pk)
        if state["at_cap"]:
            acc.max_concurrent = 1
            sel._caps[acc.pk], sel._in_flight[acc.pk] = 1, 1  # one request in flight already
            cannot.add(acc.pk)
    for n, pk in remembered.items():
        sel.affinity.memory.remember(PROVIDER.id, session(n).digest, pk, 300)

    async def go() -> None:
        for n in requests:
            ex = ask(session(n))
            before = sel.affinity.memory.lookup(PROVIDER.id, session(n).digest, 300)
            try:
                picked = await sel.pick(ex, [])
            except PoolQuotaExhausted:
                assert all(a.pk in cannot for a in pool_accounts)
                continue
            if picked is None:
                assert all(a.pk in cannot for a in pool_accounts)
                continue
            sel.release(picked.pk)
            assert picked.pk not in cannot
            if before is not None and before not in cannot and before <= len(pool_accounts):  # (removed ones too)
                assert picked.pk == before and ex.record.affinity == KEPT
            assert sel.affinity.memory.lookup(PROVIDER.id, session(n).digest, 300) == picked.pk

    run(go)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 12), per_account=st.integers(1, 3), strategy=st.sampled_from(["lru", "weighted"]))
def test_new_sessions_spread_over_the_accounts(n: int, per_account: int, strategy: str) -> None:
    """k new sessions over n accounts, each then sending more turns: no account holds more than its share."""

    pool_accounts = accounts(n)
    sel = selector(pool_accounts)
    prov = provider(1)
    object.__setattr__(prov, "selection", strategy)
    sessions = n * per_account

    async def go() -> Counter[int]:
        homes: dict[int, int] = {}
        for turn in range(3):
            for s in range(sessions):
                ex = exchange("openai_chat", chat_body(), prov)
                ex.session = session(s)
                picked = await sel.pick(ex, [])
                assert picked is not None
                sel.release(picked.pk)
                assert homes.setdefault(s, picked.pk) == picked.pk  # every turn on its first account
        return Counter(homes.values())

    per = run(go)
    assert max(per.values()) - min(per.values()) <= 1 and len(per) == n


def test_a_session_moves_only_when_its_account_cannot_serve_and_says_why() -> None:
    pool_accounts = accounts(4)
    sel = selector(pool_accounts)
    s = session(1)

    async def turn(tried: Sequence[int] = ()) -> tuple[int, str, str]:
        ex = ask(s)
        picked = await sel.pick(ex, list(tried))
        assert picked is not None
        sel.release(picked.pk)
        return picked.pk, ex.record.affinity, ex.record.affinity_reason

    async def go() -> None:
        home, how, _ = await turn()
        assert how == ASSIGNED
        assert await turn() == (home, KEPT, "")
        sel.headroom.observe(PROVIDER.id, home, 200, EXHAUSTED)  # its requests used up
        quota_home, how, why = await turn()
        assert quota_home != home and (how, why) == (MOVED, QUOTA)
        assert await turn() == (quota_home, KEPT, "")  # and it stays where it moved
        pool_accounts[quota_home - 1].max_concurrent = 1
        sel._caps[quota_home], sel._in_flight[quota_home] = 1, 1
        busy_home, how, why = await turn()
        assert (how, why) == (MOVED, BUSY) and busy_home not in (home, quota_home)
        pool_accounts[busy_home - 1].status = Account.DISABLED
        sel._in_flight.clear()
        back, how, why = await turn()
        assert (how, why) == (MOVED, UNAVAILABLE) and back not in (home, busy_home)
        failed_over, how, why = await turn(tried=[back])  # its attempt failed in this request
        assert (how, why) == (MOVED, FAILED) and failed_over not in (home, busy_home, back)

    run(go)


def test_a_new_session_avoids_an_account_running_out_while_others_have_room() -> None:
    pool_accounts = accounts(2)
    sel = selector(pool_accounts)
    sel.headroom.observe(PROVIDER.id, 1, 200, {"x-ratelimit-remaining-requests": "1",
                                               "x-ratelimit-limit-requests": "100",
                                               "x-ratelimit-reset-requests": "30s"})

    async def go() -> list[int]:
        out = []
        for s in range(4):
            picked = await sel.pick(ask(session(100 + s)), [])
            assert picked is not None
            out.append(picked.pk)
        return out

    assert run(go) == [2, 2, 2, 2]


def test_affinity_off_for_the_provider_rotates_and_records_nothing() -> None:
    pool_accounts = accounts(3)
    sel = selector(pool_accounts)
    prov = provider(1)
    object.__setattr__(prov, "affinity", False)

    async def go() -> list[tuple[int, str]]:
        out = []
        for _ in range(3):
            ex = exchange("openai_chat", chat_body(), prov)
            ex.session = session(1)
            picked = await sel.pick(ex, [])
            assert picked is not None
            out.append((picked.pk, ex.record.affinity))
        return out

    assert run(go) == [(1, ""), (2, ""), (3, "")]


def test_when_every_account_is_out_of_quota_the_client_gets_429_at_the_soonest_reset_and_no_upstream_call() -> None:
    snap = snapshot([PROVIDER])
    r = rig(snap, accounts(2))
    r.upstream.script = {"sk-unit-1": json_reply(chat_answer("one"), headers={
        "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "40s"}),
        "sk-unit-2": json_reply(chat_answer("two"), headers={
            "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "12s"})}

    async def go() -> None:
        for _ in range(2):  # each account answers once and says it has nothing left
            await dispatch(r.gw, exchange("openai_chat", chat_body(), PROVIDER))
        calls = len(r.upstream.calls)
        with pytest.raises(PoolQuotaExhausted) as info:
            await dispatch(r.gw, exchange("openai_chat", chat_body(), PROVIDER))
        assert 11 <= int(info.value.headers["Retry-After"]) <= 12
        assert len(r.upstream.calls) == calls  # nobody was asked

    run(go)


def test_a_429s_retry_after_keeps_its_account_out_of_the_next_picks() -> None:
    book = HeadroomBook()
    book.observe(1, 5, 429, {"retry-after": "20"})
    assert 19 < book.short(1, ask(None).need)[5] - time.time() <= 20


def test_memory_affinity_is_bounded_and_slides() -> None:
    now = [0.0]
    memory = MemoryAffinity(cap=3, clock=lambda: now[0])
    for s in range(4):
        memory.remember(1, session(s).digest, 10 + s, ttl=300)
    assert len(memory) == 3 and memory.lookup(1, session(0).digest, 300) is None  # the oldest went
    now[0] = 200
    assert memory.lookup(1, session(1).digest, 300) == 11  # read at 200: lives until 500
    now[0] = 450
    assert memory.lookup(1, session(1).digest, 300) == 11 and memory.lookup(1, session(2).digest, 300) is None
    assert memory.lookup(2, session(1).digest, 300) is None  # per provider
