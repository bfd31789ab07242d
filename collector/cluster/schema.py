"""The coordination tables, created idempotently (``CREATE TABLE IF NOT EXISTS``).

Several replicas start at once: ``migrate`` runs under a transaction-scoped advisory lock,
so concurrent ``CREATE TABLE IF NOT EXISTS`` never races in PostgreSQL's catalogue.
``notify_outbox`` has the columns of collector/notify/outbox.py (SQLite's schema v2) plus
three claim columns; where a PostgreSQL ledger created that table already, the claim
columns are added to it (``ADD COLUMN IF NOT EXISTS``), so the ledger can adopt either.
"""

from __future__ import annotations

from typing import Any

import psycopg

#: pg_advisory_xact_lock key of the migration ('gpfl' in ASCII)
MIGRATION_LOCK = 0x6770666C

TABLES = """
CREATE TABLE IF NOT EXISTS cluster_settings (
  key TEXT PRIMARY KEY, value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS cluster_replicas (
  replica_id TEXT PRIMARY KEY, started_at TIMESTAMPTZ NOT NULL,
  heartbeat_at TIMESTAMPTZ NOT NULL, expires_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS cluster_shards (
  shard INTEGER PRIMARY KEY, owner TEXT, epoch BIGINT NOT NULL DEFAULT 0,
  expires_at TIMESTAMPTZ NOT NULL DEFAULT '-infinity', acquired_at TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS cluster_shards_owner ON cluster_shards (owner);
CREATE TABLE IF NOT EXISTS cluster_leases (
  name TEXT PRIMARY KEY, owner TEXT, epoch BIGINT NOT NULL,
  expires_at TIMESTAMPTZ NOT NULL, acquired_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS notify_outbox (
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, channel TEXT NOT NULL,
  event_key TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, body BYTEA NOT NULL,
  state TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at DOUBLE PRECISION NOT NULL, message_id TEXT, sent_at DOUBLE PRECISION,
  UNIQUE (channel, event_key)
);
ALTER TABLE notify_outbox ADD COLUMN IF NOT EXISTS claimed_by TEXT;
ALTER TABLE notify_outbox ADD COLUMN IF NOT EXISTS claim_epoch BIGINT;
ALTER TABLE notify_outbox ADD COLUMN IF NOT EXISTS claimed_until TIMESTAMPTZ;
CREATE INDEX IF NOT EXISTS notify_outbox_due ON notify_outbox (state, channel, next_attempt_at);
"""


class ClusterError(Exception):
    """The coordination tables disagree with this replica's settings."""


def migrate(conn: psycopg.Connection[Any], shard_count: int) -> None:
    """Create the tables and one row per shard; refuse a shard count other than the one the
    database was set up with (nodes would land in different shards on different replicas)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(TABLES)
        conn.execute(
            "INSERT INTO cluster_settings (key, value) VALUES ('shard_count', %s) "
            "ON CONFLICT (key) DO NOTHING",
            (str(shard_count),),
        )
        row = conn.execute(
            "SELECT value FROM cluster_settings WHERE key = 'shard_count'"
        ).fetchone()
        stored = int(row[0]) if row else shard_count
        if stored != shard_count:
            raise ClusterError(
                f"cluster.shard_count: this replica has {shard_count}, the database was set "
                f"up with {stored}; every replica must use {stored}"
            )
        conn.execute(
            "INSERT INTO cluster_shards (shard) SELECT generate_series(0, %s - 1) "
            "ON CONFLICT (shard) DO NOTHING",
            (shard_count,),
        )
