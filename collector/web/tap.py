"""A CollectorBackend that also feeds accepted samples to the console's SeriesBuffer.

The pipeline stays unaware of the console: ``gpufleet`` wires ``SeriesTap(pipeline,
series)`` in as the app's backend, and every other call passes straight through.
"""

from __future__ import annotations

from collections.abc import Collection
from concurrent.futures import Future

from agent.model import Batch, BatchAck
from collector.api import CollectorBackend, FleetTotals, HealthReport, RejectReason, WorkloadReport
from collector.records import GpuView, Recommendation, RecommendationStatus
from collector.web.series import SeriesBuffer


class SeriesTap:
    """``backend`` with its accepted batches' samples copied into ``series``."""

    def __init__(self, backend: CollectorBackend, series: SeriesBuffer) -> None:
        self.backend = backend
        self.series = series

    def submit(self, batch: Batch, body: bytes, received_at: float) -> Future[BatchAck]:
        future = self.backend.submit(batch, body, received_at)

        def tap(done: Future[BatchAck]) -> None:  # before the edge hears of it
            if done.exception() is None and done.result().status == "accepted":
                self.series.add(batch.samples)  # a duplicate was seen before: not twice

        future.add_done_callback(tap)
        return future

    def record_rejection(self, reason: RejectReason, samples: int) -> None:
        self.backend.record_rejection(reason, samples)

    def fleet(self, now: float) -> list[GpuView]:
        return self.backend.fleet(now)

    def workloads(self, start: float, end: float) -> list[WorkloadReport]:
        return self.backend.workloads(start, end)

    def recommendations(self, statuses: Collection[RecommendationStatus]) -> list[Recommendation]:
        return self.backend.recommendations(statuses)

    def dismiss(self, rec_id: str, now: float) -> Recommendation | None:
        return self.backend.dismiss(rec_id, now)

    def health(self) -> HealthReport:
        return self.backend.health()

    def fleet_totals(self) -> FleetTotals:
        return self.backend.fleet_totals()
