"""The ledger tests run on both backends: ``ledger_url`` is a new SQLite file or a new
database on the session's real PostgreSQL 15 (tests/postgres.py). Tests about the SQLite
file or its batch log take ``tmp_path`` instead and say so."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.postgres import PostgresServer
from tests.postgres_fixture import postgres  # noqa: F401

BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(params=BACKENDS)
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "ledger.db")
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.new_database()
