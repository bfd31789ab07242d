"""Replicas for the cluster tests: keepers on a real PostgreSQL, and what the tables say."""

from __future__ import annotations

from typing import Any

import psycopg

from collector.cluster.keeper import LeaseKeeper, connector
from collector.cluster.schema import migrate
from collector.cluster.settings import ClusterSettings

#: short leases so takeovers happen in seconds
FAST = ClusterSettings(shard_count=64, lease_seconds=2.0, renew_seconds=0.25)


class Database:
    """A fresh database of the test server; every connection it opened is closed after."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._opened: list[psycopg.Connection[Any]] = []

    def connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self.url, autocommit=True)
        self._opened.append(conn)
        migrate(conn, FAST.shard_count)
        return conn

    def close(self) -> None:
        for conn in self._opened:
            conn.close()


def keeper(url: str, name: str, settings: ClusterSettings = FAST) -> LeaseKeeper:
    return LeaseKeeper(settings, name, connector(url, settings))


def owners(conn: psycopg.Connection[Any]) -> dict[int, str | None]:
    """shard -> owner of an unexpired lease (None: free or expired), by the server clock."""
    rows = conn.execute(
        "SELECT shard, CASE WHEN expires_at > now() THEN owner END FROM cluster_shards"
    ).fetchall()
    return dict(rows)


def counts(conn: psycopg.Connection[Any]) -> dict[str | None, int]:
    result: dict[str | None, int] = {}
    for owner in owners(conn).values():
        result[owner] = result.get(owner, 0) + 1
    return result
