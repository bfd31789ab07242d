"""The ``postgres`` fixture: one real PostgreSQL server per test session (tests/postgres.py).

A conftest that needs it imports it: ``from tests.postgres_fixture import postgres  # noqa: F401``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres import PostgresServer, available, start_postgres


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    if not available():
        pytest.fail("PostgreSQL 15 is not installed: scripts/test installs postgresql-15")
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()
