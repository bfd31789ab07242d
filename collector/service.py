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
from dataclasses import dataclass

from agent.model import BatchAck
from collector import reports
from collector.accounting.accountant import Accountant
from collector.accounting.applier import Applier
from collector.accounting.rates import Rates
from collector.backend import FleetTotals, HealthReport, RejectReason, WorkloadReport
from collector.config import CollectorSettings
from collector.fleet.limits import FleetLimits
from collector.fleet.live import LiveFleet
from collector.fleet.rules import FleetRules
from collector.ingest.queue import IngestQueue
from collector.ingest.stats import IngestStats
from collector.ledger.observers import Observers
from collector.ledger.store import Ledger, LedgerError
from collector.recommend.recommender import Recommender
from collector.records import DuplicateGpu, GpuView, Recommendation, RecommendationStatus
from collector.usage_report import ledger_period


class CollectorService:
    """The ``CollectorBackend``: every method is thread-safe; ``submit`` never blocks."""

    def __init__(
        self,
        queue: IngestQueue,
        fleet: LiveFleet,
        ledger: Ledger,
        accountant: Accountant,
        stats: IngestStats,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.queue = queue
        self.live = fleet
        self.ledger = ledger
        self.accountant = accountant
        self.rates = accountant.rates
        self.stats = stats
        self._clock = clock

    def submit(
        self, body: bytes, content_encoding: str | None, received_at: float
    ) -> Future[BatchAck]:
        return self.queue.submit(body, content_encoding, received_at)

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
        recs = self.ledger.recommendations(statuses)
        return sorted(recs, key=lambda r: (-r.savings.money_per_month, r.id))

    def dismiss(self, rec_id: str, now: float) -> Recommendation | None:
        return self.ledger.dismiss_recommendation(rec_id, now)

    def health(self) -> HealthReport:
        try:
            self.ledger.ping()  # cheap: probes call this every few seconds
            ok, detail = True, ""
        except LedgerError as err:
            ok, detail = False, str(err)
        return HealthReport(
            ledger_ok=ok,
            last_ingest_at=self.stats.last_ingest_at,
            lag_seconds=self.live.lag_seconds(),
            pending_samples=self.live.buffered_samples(),
            detail=detail,
            clock_offsets=self.live.clocks.estimates(),
        )

    def fleet_totals(self) -> FleetTotals:
        totals = reports.LedgerTotals.read(self.ledger, self.accountant.workload_models())
        return FleetTotals(
            currency=self.rates.currency,
            waste=tuple(reports.waste_totals(totals)),
            energy=tuple(reports.energy_totals(totals)),
            ingest=self.stats.snapshot(),
        )


@dataclass
class CollectorCore:
    """The collector's stateful parts over one ledger, without HTTP or schedules."""

    ledger: Ledger
    fleet: LiveFleet
    queue: IngestQueue
    applier: Applier
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
    ) -> CollectorCore:
        """The parts, wired, and the live fleet restored from ``ledger``."""
        stats, observers = IngestStats(), Observers()
        fleet = LiveFleet(
            fleet_rules(settings),
            rates.model_of,
            stats.count_late,
            rates.slice_fraction,
            settings.ingest.clock_correction_min_seconds,
            FleetLimits.of(settings.ingest),
        )
        accountant = Accountant(rates)
        queue = IngestQueue(settings, ledger, fleet, stats, observers)
        commit_every = settings.ingest.commit_interval_seconds
        applier = Applier(fleet, accountant, ledger, observers, commit_every, clock)
        recommender = Recommender(fleet, ledger, rates, settings.analysis, clock)
        service = CollectorService(queue, fleet, ledger, accountant, stats, clock)
        applier.restore()
        return cls(ledger, fleet, queue, applier, recommender, observers, service)

    def close(self, timeout: float = 30.0) -> None:
        """Stop the ingest thread once the batches queued for it are stored."""
        self.queue.close(timeout)


def fleet_rules(settings: CollectorSettings) -> FleetRules:
    analysis = settings.analysis
    return FleetRules(
        idle_threshold=analysis.idle_threshold,
        stale_after_seconds=analysis.stale_after_seconds,
        reorder_window_seconds=settings.ingest.reorder_window_seconds,
        min_episode_seconds=analysis.min_episode_seconds,
        backfill_wait_seconds=settings.ingest.backfill_wait_seconds,
    )
