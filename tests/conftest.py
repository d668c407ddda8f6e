"""Suite-wide fixtures."""

from __future__ import annotations

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

    yield
    with django_db_blocker.unblock():
        from django.db import connection

        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                               " WHERE datname = current_database() AND pid <> pg_backend_pid()")
