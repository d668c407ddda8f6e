"""The in-process affinity store (gateway.exchange.affinity.MemoryAffinity): what it keeps and for how long."""

from __future__ import annotations

from gateway.exchange.affinity import SWEEP, MemoryAffinity


def digest(n: int) -> bytes:
    return n.to_bytes(16, "big")


def test_finished_sessions_are_dropped_once_expired_without_being_looked_up_again() -> None:
    now = [0.0]
    memory = MemoryAffinity(cap=10_000, clock=lambda: now[0])
    for s in range(1000):  # a thousand sessions of one turn each, never seen again
        memory.remember(1, digest(s), s % 20, ttl=300)
    assert len(memory) == 1000
    now[0] = 301.0
    for s in range(1000, 1000 + 1000 // SWEEP + 1):  # the traffic that comes after them
        memory.remember(1, digest(s), s % 20, ttl=300)
    assert len(memory) == 1000 // SWEEP + 1  # only the live ones: not the cap's worth
    assert memory.lookup(1, digest(1000), 300) == 1000 % 20


def test_the_sweep_keeps_live_sessions_and_those_renewed_by_a_lookup() -> None:
    now = [0.0]
    memory = MemoryAffinity(cap=100, clock=lambda: now[0])
    for s in range(5):
        memory.remember(1, digest(s), 10 + s, ttl=300)
    now[0] = 250.0
    assert memory.lookup(1, digest(0), 300) == 10  # renewed: lives until 550, now the newest
    now[0] = 310.0
    memory.remember(2, digest(99), 7, ttl=300)  # sweeps 1-4 (expired at 300)
    assert len(memory) == 2
    assert memory.lookup(1, digest(0), 300) == 10 and memory.lookup(2, digest(99), 300) == 7


def test_a_sweep_stops_at_the_first_live_entry_and_drops_at_most_sweep_entries_at_a_time() -> None:
    now = [0.0]
    memory = MemoryAffinity(cap=1000, clock=lambda: now[0])
    for s in range(3 * SWEEP):
        memory.remember(1, digest(s), 1, ttl=10)
    now[0] = 11.0
    memory.remember(1, digest(10_000), 1, ttl=10)
    assert len(memory) == 2 * SWEEP + 1  # bounded work per remember; the rest go with the next ones
    memory.remember(1, digest(10_001), 1, ttl=10)
    memory.remember(1, digest(10_002), 1, ttl=10)
    assert len(memory) == 3 and memory.lookup(1, digest(10_000), 10) == 1
