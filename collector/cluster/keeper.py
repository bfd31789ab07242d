"""The lease keeper: one thread per replica renews its shard leases and the leader lease
every ``cluster.renew_seconds`` on a connection of its own, and publishes a ``LeaseState``.

``LeaseState`` is what readiness (/readyz) and routing read: the shards owned with their
epochs, whether this replica leads, and whether the leases are fresh. Fresh is judged on
this process's monotonic clock from the start of the last successful renewal (the server
set the expiry later than that), so it errs towards "not fresh"; it reports, it decides
nothing: ownership is decided by the epochs in PostgreSQL.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg

from collector.cluster.leader import Leader
from collector.cluster.leases import ShardLeases
from collector.cluster.schema import migrate
from collector.cluster.settings import ClusterSettings

log = logging.getLogger(__name__)

Connect = Callable[[], "psycopg.Connection[Any]"]


@dataclass(frozen=True)
class LeaseState:
    replica_id: str
    #: shard -> epoch, as of the last successful renewal
    shards: Mapping[int, int] = field(default_factory=dict)
    leader_epoch: int | None = None
    live_replicas: int = 0
    #: time.monotonic() at the start of the last successful renewal; None: never
    renewed_at: float | None = None
    lease_seconds: float = 15.0

    def fresh(self, now_monotonic: float) -> bool:
        """The last renewal is younger than a lease: what this replica holds is current."""
        if self.renewed_at is None:
            return False
        return now_monotonic - self.renewed_at < self.lease_seconds

    @property
    def leader(self) -> bool:
        return self.leader_epoch is not None


class LeaseKeeper:
    def __init__(self, settings: ClusterSettings, replica_id: str, connect: Connect) -> None:
        self.settings = settings
        self.connect = connect
        self.shards = ShardLeases(replica_id, settings.shard_count, settings.lease_seconds)
        self.leader = Leader(replica_id, settings.lease_seconds)
        self.state = LeaseState(replica_id, lease_seconds=settings.lease_seconds)
        self._conn: psycopg.Connection[Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    def renew_once(self) -> LeaseState:
        """One round: (re)connect if needed, renew, publish. Errors are logged once per
        run of failures; the state then ages into not fresh."""
        started = time.monotonic()
        try:
            conn = self._connection()
            shards = self.shards.tick(conn)
            leader_epoch = self.leader.tick(conn)
        except psycopg.Error as err:
            self._drop(err)
            return self.state
        if self._failing:
            log.info("cluster leases renewed again (%s)", self.shards.replica_id)
        self._failing = False
        self.state = LeaseState(
            self.shards.replica_id, dict(shards), leader_epoch, self.shards.live_replicas,
            started, self.settings.lease_seconds,
        )  # fmt: skip
        return self.state

    def start(self) -> None:
        """Create the tables and start renewing; a shard count other than the database's
        raises ClusterError here, an unreachable server is retried by the thread."""
        try:
            self._connection()
        except psycopg.Error as err:
            self._drop(err)
        self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing and give everything back, so others take over at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            if self._conn is not None and not self._conn.closed:
                self.shards.release_all(self._conn)
                self.leader.step_down(self._conn)
        except psycopg.Error as err:
            log.warning("cluster leases not given back (they expire instead): %s", err)
        finally:
            if self._conn is not None:
                self._conn.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.renew_once()
            self._stop.wait(self.settings.renew_seconds)

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = self.connect()
            migrate(self._conn, self.settings.shard_count)
        return self._conn

    def _drop(self, err: psycopg.Error) -> None:
        if not self._failing:
            log.warning("cluster leases not renewed (retrying every %gs): %s",
                        self.settings.renew_seconds, err)  # fmt: skip
        self._failing = True
        self.leader.epoch = None
        if self._conn is not None:
            self._conn.close()
        self._conn = None


def connector(url: str, settings: ClusterSettings) -> Connect:
    """Connections for the keeper: autocommit (each tick is one explicit transaction), and
    a statement timeout under the renewal period so a stalled server shows as not fresh."""
    timeout_ms = int(settings.renew_seconds * 1000)

    def connect() -> psycopg.Connection[Any]:
        return psycopg.connect(
            url, autocommit=True, connect_timeout=max(1, int(settings.renew_seconds)),
            options=f"-c statement_timeout={timeout_ms}",
        )  # fmt: skip

    return connect
