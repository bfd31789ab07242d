"""The PostgreSQL fixture itself: a real server, a database of its own per test."""

from __future__ import annotations

import psycopg

from tests.postgres import PostgresServer
from tests.postgres_fixture import postgres  # noqa: F401


def test_each_new_database_is_empty_and_on_postgresql_15(postgres: PostgresServer) -> None:  # noqa: F811
    first, second = postgres.new_database(), postgres.new_database()
    with psycopg.connect(first) as conn:
        conn.execute("CREATE TABLE x (i int)")
        conn.execute("INSERT INTO x VALUES (1)")
        (version,) = conn.execute("SHOW server_version_num").fetchone() or ("",)
    with psycopg.connect(second) as conn:
        row = conn.execute("SELECT count(*) FROM pg_tables WHERE tablename = 'x'").fetchone()
    assert row == (0,)
    assert str(version).startswith("15")
