"""One leader for fleet-wide work (the outbox, auto-release, fleet recommendations).

A lease row (``cluster_leases``, name ``leader``) rather than a PostgreSQL advisory lock:
- the row carries an epoch, a fencing token any transaction on any connection can check
  (``holds``); an advisory lock is visible only as "held by some session";
- it expires on the server clock, so a leader that hangs while still connected (a stuck
  event loop, a partition that keeps the TCP session) loses it; an advisory lock is held
  as long as the session lives;
- it needs no dedicated session, so it works through a pooler in transaction mode.
The price: a dead leader is replaced after up to ``lease_seconds`` + ``renew_seconds``,
not the moment its connection drops.
"""

from __future__ import annotations

from typing import Any

import psycopg

LEADER = "leader"

_RENEW = (
    "UPDATE cluster_leases SET expires_at = now() + %(lease)s * interval '1 second' "
    "WHERE name = %(name)s AND owner = %(me)s AND epoch = %(epoch)s AND expires_at > now() "
    "RETURNING epoch"
)
_ACQUIRE = (
    "INSERT INTO cluster_leases (name, owner, epoch, expires_at, acquired_at) "
    "VALUES (%(name)s, %(me)s, 1, now() + %(lease)s * interval '1 second', now()) "
    "ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, "
    "epoch = cluster_leases.epoch + 1, expires_at = excluded.expires_at, acquired_at = now() "
    "WHERE cluster_leases.expires_at <= now() RETURNING epoch"
)


class Leader:
    """Whether this replica leads, and at which epoch, as of its last ``tick``."""

    def __init__(self, replica_id: str, lease_seconds: float, name: str = LEADER) -> None:
        self.replica_id = replica_id
        self.lease_seconds = lease_seconds
        self.name = name
        self.epoch: int | None = None

    def tick(self, conn: psycopg.Connection[Any]) -> int | None:
        """Renew the lease if held, else take it if it is free or expired; the epoch held."""
        args: dict[str, Any] = {
            "name": self.name, "me": self.replica_id, "lease": self.lease_seconds,
            "epoch": self.epoch,
        }  # fmt: skip
        with conn.transaction():
            row = conn.execute(_RENEW, args).fetchone() if self.epoch is not None else None
            if row is None:
                row = conn.execute(_ACQUIRE, args).fetchone()
        self.epoch = int(row[0]) if row else None
        return self.epoch

    def step_down(self, conn: psycopg.Connection[Any]) -> None:
        """Give the lease up now (a clean shutdown); the epoch stays, so the next leader's
        is higher."""
        if self.epoch is None:
            return
        with conn.transaction():
            conn.execute(
                "UPDATE cluster_leases SET expires_at = '-infinity' "
                "WHERE name = %s AND owner = %s AND epoch = %s",
                (self.name, self.replica_id, self.epoch),
            )
        self.epoch = None


def holds(conn: psycopg.Connection[Any], name: str, replica_id: str, epoch: int) -> bool:
    """Whether ``replica_id`` holds lease ``name`` at ``epoch``, checked (and the row held
    ``FOR SHARE`` until the end of) the caller's transaction, as ``leases.owns`` does."""
    row = conn.execute(
        "SELECT 1 FROM cluster_leases WHERE name = %s AND owner = %s AND epoch = %s FOR SHARE",
        (name, replica_id, epoch),
    ).fetchone()
    return row is not None
