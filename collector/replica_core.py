"""A collector replica's core: the parts of ``CollectorCore`` wired for replicas on one
PostgreSQL (collector/replicas.py), and the backend the HTTP edge sees.

The ingest queue checks and acknowledges batches without buffering them (the shard's
owner takes them from the intake); the ``ShardedApplier`` applies the owned shards; every
replica answers /v1/fleet from the owners' published views (``live_gpus``), so all list
the whole fleet; the recommender reads the same views and runs on the leader only
(gpufleet/cli/collector.py gates it). /readyz is not ready until the lease keeper's first
renewal, nor while its lease state is stale.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from agent.model import Batch
from collector import reports
from collector.accounting.accountant import Accountant
from collector.accounting.applier import Applier
from collector.accounting.rates import Rates
from collector.analysis.work_window import WorkloadWindow
from collector.backend import HealthReport, ReadVersion, WorkloadReport
from collector.cluster.keeper import LeaseState
from collector.config import CollectorSettings
from collector.fleet.claims import PublishedHolders
from collector.fleet.live import LiveFleet
from collector.ingest.queue import IngestQueue
from collector.ingest.stats import IngestStats
from collector.kube.enrich import WorkloadEnricher, keys_of
from collector.ledger import live_gpus
from collector.ledger.observers import Observers
from collector.ledger.sql import Connection
from collector.ledger.store import Ledger, LedgerError
from collector.ledger.write_health import WriteHealth
from collector.recommend.recommender import Recommender
from collector.records import GpuView
from collector.replicas import ShardedApplier
from collector.running_totals import RunningTotals
from collector.service import CollectorCore, CollectorService, build_fleet, pending_check
from collector.usage_report import ledger_period


class ReplicaService(CollectorService):
    """``CollectorService`` over the whole fleet's published state."""

    sharded: ShardedApplier
    leases: Callable[[], LeaseState]
    stale_after_seconds: float

    def fleet(self, now: float) -> list[GpuView]:
        stale = self.stale_after_seconds
        views = self.ledger.read(live_gpus.live_views)
        return [live_gpus.stale_view(v, now, stale) for v in views]

    def workloads(self, start: float, end: float) -> list[WorkloadReport]:
        return reports.workload_reports(
            self.ledger,
            ledger_period(start, end, self._clock()),
            self.sharded.open_episodes(),
            self.accountant.workload_models(),
            self.rates.currency,
        )

    def ledger_totals(self) -> reports.LedgerTotals:
        """Read from the ledger: every replica's commits, not only this one's (the
        leader's /metrics exports them, collector/metrics/replica_scope.py)."""
        return RunningTotals(self.ledger).snapshot(self.accountant.workload_models())

    def read_version(self) -> ReadVersion:
        version = self.sharded.version + self.ledger.writes  # any replica's, and ours now
        return ReadVersion(version, version)

    def applying_fleets(self) -> list[LiveFleet]:
        """The owned shards' fleets: the front buffers nothing (every batch goes to its
        shard's owner through the intake), so their samples, lag and node clocks are this
        replica's, each node's on one replica only."""
        return [part.fleet for part in list(self.sharded.parts.values())]

    def health(self) -> HealthReport:
        report = super().health()
        state = self.leases()
        if state.fresh(time.monotonic()):
            return report
        problem = (
            "cluster leases not renewed yet (starting)"
            if state.renewed_at is None
            else f"cluster leases stale: not renewed for over {state.lease_seconds:g} s; "
            "check that PostgreSQL answers this replica"
        )
        problems = (*report.problems, problem)
        return HealthReport(
            ledger_ok=report.ledger_ok, last_ingest_at=report.last_ingest_at,
            lag_seconds=report.lag_seconds, pending_samples=report.pending_samples,
            detail="; ".join(problems), clock_offsets=report.clock_offsets, ready=False,
            problems=problems, write_path=report.write_path,
        )  # fmt: skip


class WholeFleet:
    """What the leader's recommender reads: every replica's published views; node labels
    and workload windows of the shards this replica owns."""

    def __init__(self, service: ReplicaService, sharded: ShardedApplier) -> None:
        self.service, self.sharded = service, sharded

    def views(self, now: float) -> list[GpuView]:
        try:
            return self.service.fleet(now)
        except LedgerError:
            return []

    def node_labels(self) -> dict[str, dict[str, str]]:
        parts = list(self.sharded.parts.values())
        return {n: labels for p in parts for n, labels in p.fleet.node_labels().items()}

    def workload_windows(self, now: float) -> list[WorkloadWindow]:
        parts = list(self.sharded.parts.values())
        return [w for p in parts for w in p.fleet.workload_windows(now)]


def build_replica_core(
    settings: CollectorSettings,
    ledger: Ledger,
    rates: Rates,
    leases: Callable[[], LeaseState],
    clock: Callable[[], float] = time.time,
    enrich: Callable[[Batch], Batch] | None = None,
) -> CollectorCore:
    """The core of one replica; ``leases`` is its keeper's state now; ``enrich`` as
    ``CollectorCore.build``'s, applied where a shard's owner takes a batch."""
    attribute = enrich or WorkloadEnricher(keys_of(settings.kubernetes))
    stats, observers, health = IngestStats(), Observers(), WriteHealth(clock)
    totals = RunningTotals(ledger)
    observers.attach(totals)
    front = build_fleet(settings, rates, stats)  # ingest's checks: node clocks, bounds
    front.published = PublishedHolders()  # who has each GPU, by the owners' views
    accountant = Accountant(rates, settings.analysis.idle_threshold)
    queue = IngestQueue(settings, ledger, front, stats, observers, health, buffer_here=False)
    commit_every = settings.ingest.commit_interval_seconds

    def make_part(
        shard: int, epoch: int, fence: Callable[[Connection], bool]
    ) -> tuple[LiveFleet, Applier]:
        fleet = build_fleet(settings, rates, stats)
        # an accountant of its own: it keeps the registry rows its part already sent
        part = Accountant(rates, settings.analysis.idle_threshold)
        applier = Applier(fleet, part, ledger, observers, commit_every, clock, health, fence)
        return fleet, applier

    check = pending_check(settings, attribute)
    shards = settings.cluster.shard_count
    sharded = ShardedApplier(ledger, leases, make_part, check, shards, health, commit_every,
                             clock, front)  # fmt: skip
    service = ReplicaService(queue, front, ledger, accountant, stats, totals, clock, sharded)
    service.sharded, service.leases = sharded, leases
    service.stale_after_seconds = settings.analysis.stale_after_seconds
    recommender = Recommender(WholeFleet(service, sharded), ledger, rates, settings.analysis,
                              clock)  # fmt: skip
    return CollectorCore(ledger, front, queue, sharded, recommender, observers, service)
