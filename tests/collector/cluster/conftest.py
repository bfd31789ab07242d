from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.collector.cluster.rig import Database
from tests.postgres import PostgresServer
from tests.postgres_fixture import postgres  # noqa: F401


@pytest.fixture
def db(postgres: PostgresServer) -> Iterator[Database]:  # noqa: F811
    database = Database(postgres.new_database())
    try:
        yield database
    finally:
        database.close()
