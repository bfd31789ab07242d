"""Collector replicas on one PostgreSQL (DESIGN section 7): any replica accepts any batch
into ``intake_batches``; each applies only the shards its lease keeper holds.

``ShardedApplier`` is the replica's applier. Each tick it follows the leases: a shard it
lost (or holds at a new epoch) is dropped with everything applied and not committed (the
next owner applies it again from the intake and the cursors: nothing is kept on local
disk); a shard it gained gets a fresh live fleet and applier, restored from the ledger's
GPUs and cursors of that shard and its pending batches. Then it takes the shard's new
pending batches (other replicas acknowledged them), and ticks each shard's applier, whose
commits are fenced by ``owns(shard, epoch)`` in their own transaction: a replica whose
lease was taken over writes nothing (``LedgerFenced``), so every batch is applied once.
Last it publishes its GPUs' views (collector/ledger/live_gpus.py; every
``PUBLISH_EVERY_SECONDS``, at once when its shards change), reads which node has each GPU
by every owner's views as often (the front refuses a second node's claim by them:
collector/fleet/claims.py ``PublishedHolders``) and the ledger-wide version the read caches
key on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from collector.accounting.applier import Applier, BatchCheck
from collector.cluster.keeper import LeaseState
from collector.cluster.leases import owns
from collector.cluster.shards import shard_of
from collector.fleet.live import LiveFleet
from collector.ledger import live_gpus
from collector.ledger.postgres import PgConnection
from collector.ledger.sql import Connection
from collector.ledger.store import Ledger, LedgerError
from collector.ledger.write_health import WriteHealth
from collector.records import GpuView, IdleEpisode

log = logging.getLogger(__name__)

#: an owner publishes its GPUs' views at most this often (and at a flush): every view's
#: newest reading moves with each sample, so publishing at each 1 s tick rewrote every owned
#: GPU's row every second; readers see the fleet this much later at most
PUBLISH_EVERY_SECONDS = 2.0

#: shard, epoch, the commit fence -> that shard's live fleet and applier
MakePart = Callable[[int, int, Callable[[Connection], bool]], tuple[LiveFleet, Applier]]


@dataclass
class ShardPart:
    """One owned shard: its live fleet, its applier, the pending batches it buffered."""

    epoch: int
    fleet: LiveFleet
    applier: Applier
    known: set[int] = field(default_factory=set)


class ShardedApplier:
    def __init__(
        self,
        ledger: Ledger,
        leases: Callable[[], LeaseState],
        make_part: MakePart,
        check: BatchCheck,
        shard_count: int,
        health: WriteHealth,
        commit_interval_seconds: float,
        clock: Callable[[], float] = time.time,
        front: LiveFleet | None = None,
    ) -> None:
        """``front``: the fleet ingest checks batches against; its ``published`` holders
        are read from every owner's GPUs as often as this one publishes, and its bounded
        values forgotten each tick as an applier forgets its own fleet's."""
        self.ledger, self.leases, self.make_part, self.check = ledger, leases, make_part, check
        self.shard_count = shard_count
        self.health = health
        self.commit_interval_seconds = commit_interval_seconds
        self.clock = clock
        self.parts: dict[int, ShardPart] = {}
        #: the ledger-wide version as of the last tick (``Ledger.version``)
        self.version = 0
        self._published: dict[str, bytes] = {}
        self._tracked: set[str] = set()
        self._published_at: float | None = None
        self._published_shards: set[int] = set()
        self.front = front
        self._front_at: float | None = None
        self._lock = threading.Lock()

    def tick(self, flush: bool = False, commit: bool = False) -> int:
        """Follow the leases, take new pending batches, apply (and commit when due) each
        owned shard, publish; returns the samples applied."""
        with self._lock:
            try:
                self._follow(self.leases().shards)
                self._pull()
            except LedgerError as err:  # the commits below report the ledger's health
                log.warning("replica: pending batches not read: %s", err)
            applied = 0
            for shard, part in list(self.parts.items()):
                applied += part.applier.tick(flush, commit)
                if part.applier.fenced:
                    log.info("shard %d moved to another replica: dropped", shard)
                    self._drop(shard)
            try:
                self._publish(flush)
                self._follow_front(flush)
                self.version = self.ledger.version()
            except LedgerError as err:
                log.warning("replica: live GPUs not published: %s", err)
        return applied

    def waiting_since(self) -> float | None:
        waits = [w for p in self.parts.values() if (w := p.applier.waiting_since()) is not None]
        return min(waits, default=None)

    def owned_views(self, now: float) -> list[GpuView]:
        """The owned shards' GPUs now (their per-GPU series are this replica's)."""
        return [v for part in list(self.parts.values()) for v in part.fleet.views(now)]

    def open_episodes(self) -> list[IdleEpisode]:
        """The owned shards' ongoing idle episodes."""
        return [e for part in list(self.parts.values()) for e in part.fleet.open_episodes()]

    def _follow(self, owned: Mapping[int, int]) -> None:
        for shard in [s for s, p in self.parts.items() if owned.get(s) != p.epoch]:
            log.info("shard %d no longer held at epoch %d: dropped", shard, self.parts[shard].epoch)
            self._drop(shard)
        gained = {s: e for s, e in owned.items() if s not in self.parts}
        if not gained:
            return
        records, cursors = self.ledger.gpus(), self.ledger.cursors()
        for shard, epoch in sorted(gained.items()):
            fleet, applier = self.make_part(shard, epoch, self._fence(shard, epoch))
            pending = self.ledger.pending_of_shards([shard])
            mine = [r for r in records if shard_of(r.node, self.shard_count) == shard]
            applier.restore_from(mine, cursors, pending, self.check)
            self.parts[shard] = ShardPart(epoch, fleet, applier, {p.batch_id for p in pending})

    def _fence(self, shard: int, epoch: int) -> Callable[[Connection], bool]:
        replica = self.leases().replica_id

        def fence(conn: Connection) -> bool:
            assert isinstance(conn, PgConnection)
            return owns(conn.raw, replica, shard, epoch)

        return fence

    def _pull(self) -> None:
        """Buffer the owned shards' pending batches not buffered yet, oldest first."""
        if not self.parts:
            return
        pending = self.ledger.pending_shards()
        for shard, part in self.parts.items():
            part.known &= {bid for bid, s in pending.items() if s == shard}
        new = [bid for bid, s in pending.items() if s in self.parts]
        known = [bid for part in self.parts.values() for bid in part.known]
        if len(new) <= len(known):
            return
        for logged in self.ledger.pending_of_shards(sorted(self.parts), known):
            owner = self.parts.get(shard_of(logged.entry.node, self.shard_count))
            if owner is not None and logged.batch_id not in owner.known:
                owner.known.add(logged.batch_id)
                owner.applier.take(logged, self.check)

    def _publish(self, flush: bool) -> None:
        now = self.clock()
        last = self._published_at
        gained_or_lost = set(self.parts) != self._published_shards
        if not (gained_or_lost or _due(last, now, flush)):
            return
        self._published_at, self._published_shards = now, set(self.parts)
        changed: list[tuple[int, GpuView, bytes]] = []
        tracked: list[str] = []
        for shard, part in self.parts.items():
            for view in part.fleet.views(now):
                tracked.append(view.uuid)
                body = live_gpus.encode_view(view)
                if self._published.get(view.uuid) != body:
                    changed.append((shard, view, body))
        if not changed and set(tracked) == self._tracked:
            return  # no write: the ledger-wide version moves only when something changed
        with self.ledger.write_transaction() as conn:
            live_gpus.publish(conn, changed, sorted(self.parts), tracked)
        self._published.update((v.uuid, body) for _, v, body in changed)
        self._tracked = set(tracked)

    def _follow_front(self, flush: bool) -> None:
        front = self.front
        if front is None:
            return
        now, last = self.clock(), self._front_at
        if not _due(last, now, flush):
            return
        self._front_at = now
        front.forget_silent(now)  # it tracks no GPU: this forgets its unseen values
        if front.published is not None:
            front.published.refresh(self.ledger.read(live_gpus.holders), now)

    def _drop(self, shard: int) -> None:
        part = self.parts.pop(shard)
        for view in part.fleet.views(self.clock()):
            self._published.pop(view.uuid, None)


def _due(last: float | None, now: float, flush: bool) -> bool:
    """Whether a step run every ``PUBLISH_EVERY_SECONDS`` (and at a flush) is due."""
    return flush or last is None or now - last >= PUBLISH_EVERY_SECONDS
