"""Shard leases: each replica holds some shards through rows in ``cluster_shards``.

One ``tick`` (every ``cluster.renew_seconds``, one transaction) heartbeats the replica,
renews the leases it still holds, gives up shards past its target (ceil(S / live
replicas)) and claims free or expired ones up to it. Every time comparison is
PostgreSQL's ``now()``; the replica's own clock decides nothing.

Each acquisition raises the shard's ``epoch``: the fencing token. An applier checks
``owns(conn, ...)`` inside its own transaction before it writes; the check takes the lease
row ``FOR SHARE``, so a takeover (an UPDATE of that row) waits until the applier commits,
and an applier whose lease was taken over finds a higher epoch and writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg

from collector.cluster.shards import claim_count, shards_to_release, target_count

_HEARTBEAT = (
    "INSERT INTO cluster_replicas (replica_id, started_at, heartbeat_at, expires_at) "
    "VALUES (%(me)s, now(), now(), now() + %(lease)s * interval '1 second') "
    "ON CONFLICT (replica_id) DO UPDATE SET heartbeat_at = now(), "
    "expires_at = excluded.expires_at"
)
_LIVE = "SELECT count(*) FROM cluster_replicas WHERE expires_at > now()"
_RENEW = (
    "UPDATE cluster_shards SET expires_at = now() + %(lease)s * interval '1 second' "
    "WHERE owner = %(me)s AND expires_at > now() RETURNING shard, epoch"
)
_RELEASE = (
    "UPDATE cluster_shards SET owner = NULL, expires_at = '-infinity' "
    "WHERE owner = %(me)s AND shard = ANY(%(shards)s)"
)
_CLAIM = (
    "UPDATE cluster_shards SET owner = %(me)s, epoch = epoch + 1, acquired_at = now(), "
    "expires_at = now() + %(lease)s * interval '1 second' "
    "WHERE shard IN (SELECT shard FROM cluster_shards WHERE expires_at <= now() "
    "ORDER BY shard LIMIT %(count)s FOR UPDATE SKIP LOCKED) RETURNING shard, epoch"
)
#: heartbeat rows of replicas gone for an hour are history, not members
_PRUNE = "DELETE FROM cluster_replicas WHERE expires_at < now() - interval '1 hour'"


class ShardLeases:
    """The shards one replica holds, with their epochs, as of its last ``tick``."""

    def __init__(self, replica_id: str, shard_count: int, lease_seconds: float) -> None:
        self.replica_id = replica_id
        self.shard_count = shard_count
        self.lease_seconds = lease_seconds
        self.epochs: dict[int, int] = {}
        self.live_replicas = 0

    def tick(self, conn: psycopg.Connection[Any]) -> Mapping[int, int]:
        """Heartbeat, renew, rebalance and claim in one transaction; shard -> epoch held."""
        args: dict[str, Any] = {"me": self.replica_id, "lease": self.lease_seconds}
        with conn.transaction():
            conn.execute(_HEARTBEAT, args)
            row = conn.execute(_LIVE).fetchone()
            live = int(row[0]) if row else 1
            held = dict(conn.execute(_RENEW, args).fetchall())
            target = target_count(self.shard_count, live)
            extra = shards_to_release(held.keys(), target)
            if extra:
                conn.execute(_RELEASE, {**args, "shards": sorted(extra)})
                held = {s: e for s, e in held.items() if s not in extra}
            wanted = claim_count(len(held), target)
            if wanted:
                held.update(conn.execute(_CLAIM, {**args, "count": wanted}).fetchall())
            conn.execute(_PRUNE)
        self.epochs, self.live_replicas = held, live
        return held

    def release_all(self, conn: psycopg.Connection[Any]) -> None:
        """Give every shard back and leave (a clean shutdown): others take them at once."""
        with conn.transaction():
            conn.execute(
                "UPDATE cluster_shards SET owner = NULL, expires_at = '-infinity' WHERE owner = %s",
                (self.replica_id,),
            )
            conn.execute("DELETE FROM cluster_replicas WHERE replica_id = %s", (self.replica_id,))
        self.epochs = {}


def owns(conn: psycopg.Connection[Any], replica_id: str, shard: int, epoch: int) -> bool:
    """Whether ``replica_id`` still holds ``shard`` at ``epoch``; call it inside the
    transaction that applies the shard's batches, before writing. The row stays locked
    ``FOR SHARE`` until that transaction ends, so no takeover commits in between.

    The epoch, not the expiry, is the fence: a lease past its expiry that nobody took over
    is still exclusive. Keep the transaction short: the owner's own renewal waits for it."""
    row = conn.execute(
        "SELECT 1 FROM cluster_shards WHERE shard = %s AND owner = %s AND epoch = %s FOR SHARE",
        (shard, replica_id, epoch),
    ).fetchone()
    return row is not None
