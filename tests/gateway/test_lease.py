"""One process at a time holds a lease; when it stops or dies another takes over."""

from __future__ import annotations

import threading
import time

import pytest

from accounts.models import Lease as LeaseRow
from gateway.background.lease import Lease, process_name

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_free_lease_is_taken_renewed_by_its_holder_and_refused_to_others_while_it_lasts() -> None:
    first, second = Lease("duty", 30, "first"), Lease("duty", 30, "second")
    assert first.hold() and first.held
    assert not second.hold() and not second.held
    assert first.hold()  # renewed
    assert first.current() == second.current() == "first"


def test_a_lease_whose_holder_stopped_renewing_is_taken_by_another_and_its_holder_finds_it_lost() -> None:
    dead, alive = Lease("duty", 0.3, "dead"), Lease("duty", 0.3, "alive")
    assert dead.hold()
    assert not alive.hold()
    time.sleep(0.4)
    assert alive.hold()
    assert not dead.hold() and not dead.held
    assert alive.current() == "alive"


def test_a_released_lease_is_taken_at_once() -> None:
    leaving, staying = Lease("duty", 60, "leaving"), Lease("duty", 60, "staying")
    assert leaving.hold()
    leaving.release()
    assert leaving.current() == "" and staying.hold()
    leaving.release()  # no longer its holder: changes nothing
    assert staying.current() == "staying"


def test_leases_of_different_duties_are_held_apart() -> None:
    assert Lease("one", 60, "a").hold() and Lease("two", 60, "b").hold()
    assert set(LeaseRow.objects.values_list("name", "holder")) == {("one", "a"), ("two", "b")}


def test_of_many_processes_trying_at_the_same_moment_exactly_one_holds_it() -> None:
    contenders = [Lease("duty", 60) for _ in range(6)]
    start = threading.Barrier(len(contenders))
    won: list[str] = []

    def contend(lease: Lease) -> None:
        start.wait()
        for _ in range(5):
            if lease.hold():
                won.append(lease.holder)

    threads = [threading.Thread(target=contend, args=(lease,)) for lease in contenders]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(set(won)) == 1 and len(won) == 5


def test_a_holder_is_named_by_host_and_process() -> None:
    import os
    import socket

    host, pid, tag = process_name().rsplit(":", 2)
    assert (host, int(pid)) == (socket.gethostname(), os.getpid()) and tag
    assert process_name() != process_name()


def test_a_lease_row_deleted_under_its_holder_is_made_again_and_taken() -> None:
    lease = Lease("duty", 60, "a")
    assert lease.hold()
    LeaseRow.objects.all().delete()  # e.g. a test database flushed between tests
    assert lease.hold() and lease.current() == "a"
