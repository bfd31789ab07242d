"""The collector's core, assembled, and the thin backend the HTTP edge and the exporters see.

Data flows one way: ``IngestQueue.submit`` stores each batch in the ledger and buffers it
in the ``LiveFleet``; the ``Applier`` applies what is ready, accounts it and commits it;
the ``Recommender`` evaluates on its own schedule; ``Observers`` see stored batches and
commits. ``CollectorService`` only answers: it submits to the queue and reads the live
fleet, the ledger and the rates. Nothing downstream calls back into ingest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Protocol, overload

from agent.model import Batch, BatchAck
from collector import reports
from collector.accounting.accountant import Accountant
from collector.accounting.applier import Applier, BatchCheck
from collector.accounting.rates import Rates
from collector.backend import (
    FleetTotals,
    HealthReport,
    IngestReport,
    ReadVersion,
    RejectReason,
    WorkloadReport,
)
from collector.config import CollectorSettings
from collector.fleet.limits import FleetLimits
from collector.fleet.live import LiveFleet
from collector.fleet.rules import FleetRules
from collector.fleet.windows import WorkloadWindows
from collector.health import WritePath
from collector.ingest.decode import accept_body
from collector.ingest.queue import IngestQueue
from collector.ingest.stats import IngestStats
from collector.kube.enrich import WorkloadEnricher, keys_of
from collector.ledger.observers import Observers
from collector.ledger.store import Ledger, LedgerError
from collector.ledger.write_health import WriteHealth, write_problems
from collector.node_binding import NodeBinding
from collector.notify.commands import owned_release_command
from collector.recommend.recommender import Recommender
from collector.records import (
    DuplicateGpu,
    GpuView,
    Recommendation,
    RecommendationKind,
    RecommendationStatus,
)
from collector.running_totals import RunningTotals
from collector.usage_report import ledger_period


class Applying(Protocol):
    """An applier as the service and the schedules see it: one collector's ``Applier``, or
    a replica's ``ShardedApplier`` (collector/replicas.py)."""

    health: WriteHealth
    commit_interval_seconds: float

    def tick(self, flush: bool = False, commit: bool = False) -> int: ...
    def waiting_since(self) -> float | None: ...


class CollectorService:
    """The ``CollectorBackend``: every method is thread-safe; ``submit`` never blocks."""

    def __init__(
        self,
        queue: IngestQueue,
        fleet: LiveFleet,
        ledger: Ledger,
        accountant: Accountant,
        stats: IngestStats,
        totals: RunningTotals,
        clock: Callable[[], float] = time.time,
        applier: Applying | None = None,
    ) -> None:
        """``totals``: the ledger's totals kept in memory (attached to the observers that
        the applier tells of its commits)."""
        self.queue = queue
        #: whose commits the health report judges (None: commits are not judged)
        self.applier = applier
        self.live = fleet
        self.ledger = ledger
        self.accountant = accountant
        self.rates = accountant.rates
        self.stats = stats
        self.totals = totals
        self._clock = clock

    def submit(
        self,
        body: bytes,
        content_encoding: str | None,
        received_at: float,
        nodes: NodeBinding | None = None,
    ) -> Future[BatchAck]:
        return self.queue.submit(body, content_encoding, received_at, nodes)

    def record_rejection(self, reason: RejectReason, samples: int) -> None:
        self.stats.count_rejected(reason, samples)

    def fleet(self, now: float) -> list[GpuView]:
        return self.live.views(now)

    def duplicate_gpus(self) -> list[DuplicateGpu]:
        return self.live.duplicates.all()

    def workloads(self, start: float, end: float) -> list[WorkloadReport]:
        return reports.workload_reports(
            self.ledger,
            ledger_period(start, end, self._clock()),
            self.live.open_episodes(),
            self.accountant.workload_models(),
            self.rates.currency,
        )

    def recommendations(
        self, statuses: Collection[RecommendationStatus] | None
    ) -> list[Recommendation]:
        recs = [_with_command(r) for r in self.ledger.recommendations(statuses)]
        return sorted(recs, key=lambda r: (-r.savings.money_per_month, r.id))

    def dismiss(self, rec_id: str, now: float) -> Recommendation | None:
        return _with_command(self.ledger.dismiss_recommendation(rec_id, now))

    def restore(self, rec_id: str, now: float) -> Recommendation | None:
        return _with_command(self.ledger.restore_recommendation(rec_id, now))

    def read_version(self) -> ReadVersion:
        return ReadVersion(self.live.version, self.ledger.writes)

    def health(self) -> HealthReport:
        """The ledger answers (a ping) and the write path works (collector/ledger/
        write_health.py): cheap, probes call this every few seconds."""
        problems: list[str] = []
        try:
            self.ledger.ping()
        except LedgerError as err:
            problems.append(f"the ledger does not answer: {err}")
        if (space := self.ledger.space_problem()) is not None:
            problems.append(space)
        write_path = self.write_path()
        if self.applier is not None:
            applier = self.applier
            problems += write_problems(
                applier.health.state(),
                applier.waiting_since(),
                applier.commit_interval_seconds,
                self._clock(),
            )
        applying = self.applying_fleets()
        return HealthReport(
            ledger_ok=not problems,
            last_ingest_at=self.stats.last_ingest_at,
            lag_seconds=max((f.lag_seconds() for f in applying), default=0.0),
            pending_samples=sum(f.buffered_samples() for f in applying),
            detail="; ".join(problems),
            clock_offsets={n: o for f in applying for n, o in f.clocks.estimates().items()},
            ready=not problems,
            problems=tuple(problems),
            write_path=write_path,
        )

    def applying_fleets(self) -> list[LiveFleet]:
        """The live fleets this process applies batches through (their buffered samples,
        lag and node clocks are its health): one collector's own."""
        return [self.live]

    def write_path(self) -> WritePath:
        backlog, quarantined = self.ledger.intake_backlog(), self.ledger.quarantined()
        state = self.applier.health.state() if self.applier is not None else None
        return WritePath(
            last_commit_at=state.last_commit_at if state else None,
            commit_failures=state.commit_failures if state else {},
            intake_failures=state.intake_failures if state else {},
            backlog_batches=backlog.batches,
            backlog_bytes=backlog.bytes,
            oldest_pending_at=backlog.oldest_received_at,
            quarantined_batches=quarantined.count,
            newest_quarantined=quarantined.newest,
        )

    def fleet_totals(self) -> FleetTotals:
        """The all-time totals as of the last commit, from memory (no ledger read)."""
        totals = self.ledger_totals()
        return FleetTotals(
            currency=self.rates.currency,
            waste=tuple(reports.waste_totals(totals)),
            energy=tuple(reports.energy_totals(totals)),
            ingest=self.stats.snapshot(),
            intake_corrupt_records=self.ledger.intake_corrupt_records(),
        )

    def ledger_totals(self) -> reports.LedgerTotals:
        """What ``fleet_totals`` sums: this process's running totals."""
        return self.totals.snapshot(self.accountant.workload_models())

    def ingest_report(self) -> IngestReport:
        return IngestReport(
            counters=self.stats.snapshot(),
            intake_corrupt_records=self.ledger.intake_corrupt_records(),
            last_ingest_at=self.stats.last_ingest_at,
        )


@dataclass
class CollectorCore:
    """The collector's stateful parts over one ledger, without HTTP or schedules."""

    ledger: Ledger
    fleet: LiveFleet
    queue: IngestQueue
    applier: Applying
    recommender: Recommender
    observers: Observers
    service: CollectorService

    @classmethod
    def build(
        cls,
        settings: CollectorSettings,
        ledger: Ledger,
        rates: Rates,
        clock: Callable[[], float] = time.time,
        enrich: Callable[[Batch], Batch] | None = None,
    ) -> CollectorCore:
        """The parts, wired, and the live fleet restored from ``ledger``. ``enrich``
        attributes pod workloads (collector/kube/enrich.py); None: from the labels the
        agents send, with ``settings.kubernetes``' keys."""
        enrich = enrich or WorkloadEnricher(keys_of(settings.kubernetes))
        stats, observers, health = IngestStats(), Observers(), WriteHealth(clock)
        # seeded before the applier can commit; told of commits before anything attached later
        totals = RunningTotals(ledger)
        observers.attach(totals)
        fleet = build_fleet(settings, rates, stats)
        accountant = Accountant(rates, settings.analysis.idle_threshold)
        queue = IngestQueue(settings, ledger, fleet, stats, observers, health, enrich=enrich)
        commit_every = settings.ingest.commit_interval_seconds
        applier = Applier(fleet, accountant, ledger, observers, commit_every, clock, health)
        recommender = Recommender(fleet, ledger, rates, settings.analysis, clock)
        service = CollectorService(queue, fleet, ledger, accountant, stats, totals, clock, applier)
        applier.restore(pending_check(settings, enrich))
        return cls(ledger, fleet, queue, applier, recommender, observers, service)

    def close(self, timeout: float = 30.0) -> None:
        """Stop the ingest thread once the batches queued for it are stored."""
        self.queue.close(timeout)


def pending_check(settings: CollectorSettings, enrich: Callable[[Batch], Batch]) -> BatchCheck:
    """How a pending batch is judged where it is applied (after a restart, or by a
    replica's shard owner): today's edge rules at the time it arrived, its node's clock
    measured in the applying fleet (a new one, or not the fleet that accepted it), then
    ``enrich``."""

    def check(body: bytes, at: float, live: LiveFleet) -> Batch:
        return enrich(accept_body(body, None, at, settings, live.clocks, live.max_power_of))

    return check


def build_fleet(settings: CollectorSettings, rates: Rates, stats: IngestStats) -> LiveFleet:
    """An empty live fleet under ``settings``, counting its anomalies in ``stats``."""
    return LiveFleet(
        fleet_rules(settings),
        rates.model_of,
        stats.count_late,
        rates.slice_fraction,
        settings.ingest.clock_correction_min_seconds,
        rates.max_power_watts,
        stats.count_implausible,
        FleetLimits.of(settings.ingest),
        WorkloadWindows(settings.analysis.bottleneck_window_seconds),
    )


def fleet_rules(settings: CollectorSettings) -> FleetRules:
    analysis = settings.analysis
    return FleetRules(
        idle_threshold=analysis.idle_threshold,
        stale_after_seconds=analysis.stale_after_seconds,
        reorder_window_seconds=settings.ingest.reorder_window_seconds,
        min_episode_seconds=analysis.min_episode_seconds,
        backfill_wait_seconds=settings.ingest.backfill_wait_seconds,
    )


@overload
def _with_command(rec: Recommendation) -> Recommendation: ...
@overload
def _with_command(rec: None) -> None: ...
def _with_command(rec: Recommendation | None) -> Recommendation | None:
    """A release with the command that frees its GPUs, as the chat messages give it (its
    owner's: a Deployment's pod is scaled to zero, not deleted)."""
    if rec is None or rec.kind is not RecommendationKind.RELEASE_IDLE:
        return rec
    return replace(rec, command=owned_release_command(rec.workload_key, rec.owner))
