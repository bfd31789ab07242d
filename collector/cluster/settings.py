"""The ``cluster`` settings section: shards and lease timing (used with a PostgreSQL ledger)."""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass

from gpufleet.settings import ConfigError


@dataclass(frozen=True)
class ClusterSettings:
    #: shards the fleet's nodes fall into (hash(node) mod this); fixed for a deployment:
    #: changing it moves nodes between shards. More shards than replicas, always
    shard_count: int = 64
    #: a lease not renewed for this long (PostgreSQL's clock) is free for another replica:
    #: the longest a dead replica's shards, or a dead leader's work, wait for a new owner
    lease_seconds: float = 15.0
    #: how often a replica renews its leases, rebalances and heartbeats; a third of
    #: lease_seconds rides out two missed renewals
    renew_seconds: float = 5.0
    #: this replica's name in the lease tables; empty = host, pid and a random suffix (the
    #: Helm chart sets the pod name)
    replica_id: str = ""
    #: with a PostgreSQL ledger, run as one of several replicas (collector/replicas.py):
    #: shards by lease, fleet-wide work on the leader. False (one collector): this process
    #: applies every batch itself, as on SQLite, and must be the only one on the ledger;
    #: a restart after kill -9 then applies at once, where a replica waits for the dead
    #: one's leases to expire. The Helm chart sets it with a PostgreSQL ledger
    enabled: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.shard_count <= 4096:
            raise ConfigError(f"cluster.shard_count: must be 1..4096, got {self.shard_count}")
        if not 0 < self.renew_seconds < self.lease_seconds:
            raise ConfigError(
                f"cluster.renew_seconds: must be > 0 and shorter than cluster.lease_seconds "
                f"({self.lease_seconds:g}), got {self.renew_seconds:g}"
            )
        if len(self.replica_id) > 200:
            raise ConfigError(
                f"cluster.replica_id: at most 200 characters, got {len(self.replica_id)}"
            )


def replica_name(settings: ClusterSettings) -> str:
    """The configured replica id, else ``<host>-<pid>-<random>`` (unique per process start,
    so a restarted process never inherits its predecessor's leases)."""
    if settings.replica_id:
        return settings.replica_id
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
