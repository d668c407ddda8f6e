"""Suite-wide fixtures."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: Any, django_db_blocker: Any) -> Iterator[None]:
    """pytest-django's test database, dropped cleanly at the end on PostgreSQL too.

    Daemon threads (the request-log writer, the async account pickers) still hold their
    connections when the suite ends; PostgreSQL refuses to drop a database in use, which
    left a `test_*` database behind on the CI machine after every run.
    """

    _forget_shared_counters()
    yield
    with django_db_blocker.unblock():
        from django.db import connection

        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                               " WHERE datname = current_database() AND pid <> pg_backend_pid()")


def _forget_shared_counters() -> None:
    """A new test database starts its keys' ids from 1 again, while Redis keeps the rate windows,
    token and USD counters of the last run's keys under those ids: a key of this run would start
    over its budget. The counters belong with the database, so they start empty with it."""

    url = os.environ.get("REDIS_URL")
    if url:
        import redis

        with redis.Redis.from_url(url) as client:
            for key in client.scan_iter("gw:*", count=1000):
                client.delete(key)
