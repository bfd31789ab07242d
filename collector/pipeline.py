"""The collector's stateful heart: ingest -> per-GPU order -> intervals -> accounting -> ledger.

One ``Pipeline`` owns the in-memory fleet state. ``submit`` (the HTTP app's way in) and
``ingest`` make a batch durable in the intake log (the ledger acknowledges it) and buffer
its samples; ``submit`` does it on the ingest thread, which also decodes and validates the
body and stores whatever has queued as one group. ``tick`` applies every sample that is
past the reorder window and accounts the intervals (energy, idle, cost, carbon per GPU and
workload) into the write in progress; every ``ingest.commit_interval_seconds`` it commits
that write, the GPUs' cursors and the batches now applied in one transaction. After a crash,
``restore`` rebuilds the state from the ledger: cursors say what was committed; pending
batches hold what was acknowledged but not committed.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
import math
import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import Future

import msgspec

from agent.model import Batch, BatchAck, GpuInfo, GpuSample
from collector import reports
from collector.accounting.accountant import Accountant
from collector.analysis.carbon import CarbonContext
from collector.backend import FleetTotals, HealthReport, RejectReason, WorkloadReport
from collector.config import CollectorSettings
from collector.fleet.rules import FleetRules
from collector.fleet.state import TrackedGpu, mig_shares
from collector.ingest.queue import IngestQueue
from collector.ingest.stats import IngestStats
from collector.ledger.store import GpuCursor, Ledger, LedgerError, LedgerWrite
from collector.recommend.lifecycle import RecommendPolicy, evaluate, reconcile
from collector.records import GpuView, Recommendation, RecommendationStatus

log = logging.getLogger(__name__)
_SAMPLE_DECODER = msgspec.json.Decoder(GpuSample)
_SAMPLE_ENCODER = msgspec.json.Encoder()
_BATCH_DECODER = msgspec.json.Decoder(Batch)


class Pipeline:
    def __init__(
        self,
        settings: CollectorSettings,
        ledger: Ledger,
        accountant: Accountant,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.accountant = accountant
        self.clock = clock
        self.stats = IngestStats()
        self.rules = FleetRules(
            idle_threshold=settings.analysis.idle_threshold,
            stale_after_seconds=settings.analysis.stale_after_seconds,
            reorder_window_seconds=settings.ingest.reorder_window_seconds,
            min_episode_seconds=settings.analysis.min_episode_seconds,
        )
        self._lock = threading.RLock()
        self.queue = IngestQueue(settings, lambda: self.ledger, self._buffer_stored, self.stats)
        self._gpus: dict[str, TrackedGpu] = {}
        self._node_labels: dict[str, dict[str, str]] = {}
        #: pending batch id -> how many of its GPUs still have samples to apply
        self._pending: dict[int, int] = {}
        #: gpu uuid -> heap of (newest sample timestamp in a pending batch, batch id)
        self._waiting: dict[str, list[tuple[float, int]]] = {}
        #: pending batches now fully applied, deleted by the next commit
        self._done: list[int] = []
        #: what was applied since the last commit (kept, and added to, while one fails)
        self._unsaved = LedgerWrite()
        #: GPUs whose cursor moved since the last commit
        self._moved: set[str] = set()
        self._committed_at = -math.inf
        self._policy = RecommendPolicy.default()
        self._evaluated_at: float | None = None
        self.restore()

    # -- ingest (collector/ingest/queue.py) ---------------------------------------------

    def ingest(self, batch: Batch, body: bytes, received_at: float) -> BatchAck:
        """``IngestQueue.ingest``: a decoded batch made durable and buffered; its ack."""
        return self.queue.ingest(batch, body, received_at)

    def submit(
        self, body: bytes, content_encoding: str | None, received_at: float
    ) -> Future[BatchAck]:
        """``IngestQueue.submit``: a body as POSTed, checked, stored and buffered on the
        ingest thread; the HTTP app's way in."""
        return self.queue.submit(body, content_encoding, received_at)

    def on_accepted(self, hook: Callable[[Batch], None]) -> None:
        self.queue.on_accepted(hook)

    def close(self, timeout: float = 30.0) -> None:
        """Stop the ingest thread once the batches queued for it are stored."""
        self.queue.close(timeout)

    def _buffer_stored(self, batch_id: int, batch: Batch) -> int:
        with self._lock:
            return self._buffer(batch_id, batch)

    def _buffer(self, batch_id: int, batch: Batch, replay: bool = False) -> int:
        """Buffer ``batch``'s samples; those too late are counted, except on ``replay``
        after a restart (a pending batch's samples applied before the crash)."""
        self._node_labels[batch.node] = dict(batch.node_labels)
        for info in batch.gpus:
            self._track(info, batch.node)
        by_gpu: dict[str, list[GpuSample]] = {}
        for sample in batch.samples:
            group = by_gpu.get(sample.gpu_uuid)
            if group is None:
                by_gpu[sample.gpu_uuid] = [sample]
            else:
                group.append(sample)
        accepted = gpus = 0
        for uuid, samples in by_gpu.items():
            gpu = self._gpus.get(uuid)
            queued, newest = gpu.buffer_all(samples, self.rules) if gpu is not None else (0, 0.0)
            if queued:
                accepted += queued
                gpus += 1
                heapq.heappush(self._waiting.setdefault(uuid, []), (newest, batch_id))
        if accepted < len(batch.samples) and not replay:
            self.stats.count_late(len(batch.samples) - accepted)
        if gpus:
            self._pending[batch_id] = gpus
        else:
            self._done.append(batch_id)
        return accepted

    def _track(self, info: GpuInfo, node: str) -> TrackedGpu:
        gpu = self._gpus.get(info.uuid)
        if gpu is None or gpu.info != info or gpu.node != node:
            model = self.accountant.model_of(info)
            if gpu is None:
                gpu = TrackedGpu(info=info, node=node, model=model)
                self._gpus[info.uuid] = gpu
            else:  # a GPU moved or its identity changed (driver update): keep its history
                gpu.info, gpu.node, gpu.model = info, node, model
        return gpu

    # -- applying -------------------------------------------------------------------------

    def tick(self, flush: bool = False, commit: bool = False) -> int:
        """Apply ready samples; commit what was applied when ``ingest.commit_interval_seconds``
        has passed since the last commit, or ``commit``, or ``flush`` (which also applies
        every buffered sample). Returns the number applied. A failed commit keeps its
        deltas: the next tick commits them with its own."""
        now = self.clock()
        with self._lock:
            write = self._unsaved
            applied = 0
            mig_parents = []
            for gpu in self._gpus.values():
                if gpu.info.mig_enabled:  # after its instances: their holders get its energy
                    mig_parents.append(gpu)
                elif gpu.buffered:
                    applied += self._apply(gpu, flush, write, now)
            for gpu in mig_parents:
                if gpu.buffered:
                    applied += self._apply(gpu, flush, write, now)
            due = now - self._committed_at >= self.settings.ingest.commit_interval_seconds
            if (self._moved or self._done) and (flush or commit or due):
                self._commit(now)
            return applied

    def _commit(self, now: float) -> None:
        write = self._unsaved
        for uuid in self._moved:
            write.cursors[uuid] = self._cursor(self._gpus[uuid])
        write.batches_done = list(self._done)
        self.ledger.commit(write)  # on LedgerError all of it stays for the next tick
        del self._done[: len(write.batches_done)]
        self._unsaved, self._moved, self._committed_at = LedgerWrite(), set(), now

    def _apply(self, gpu: TrackedGpu, flush: bool, write: LedgerWrite, now: float) -> int:
        """Apply one GPU's ready samples into ``write``; returns how many."""
        result = gpu.apply_ready(self.rules, flush=flush, now=now)
        if gpu.info.mig_enabled and (shares := mig_shares(gpu, self._gpus.values())):
            for interval in result.intervals:
                interval.shares = shares
        if result.late:
            self.stats.count_late(result.late)
        if result.samples or result.late:
            self._release(gpu)
        if not result.samples:
            return 0
        self.accountant.account(gpu, result, self._node_labels.get(gpu.node, {}), write)
        self._moved.add(gpu.info.uuid)
        if (record := self.accountant.gpu_record(gpu)) is not None:
            write.gpus[gpu.info.uuid] = record
        return len(result.samples)

    def _release(self, gpu: TrackedGpu) -> None:
        """Count ``gpu`` done with every pending batch whose samples it has applied."""
        waiting = self._waiting.get(gpu.info.uuid)
        until = gpu.applied_until
        while waiting and waiting[0][0] <= until:
            _, batch_id = heapq.heappop(waiting)
            left = self._pending[batch_id] - 1
            if left:
                self._pending[batch_id] = left
            else:
                del self._pending[batch_id]
                self._done.append(batch_id)

    def _cursor(self, gpu: TrackedGpu) -> GpuCursor:
        assert gpu.last is not None
        return GpuCursor(
            gpu_uuid=gpu.info.uuid,
            applied_until=gpu.last.timestamp,
            last_sample=_SAMPLE_ENCODER.encode(gpu.last.to_sample(gpu.info.uuid)),
            open_episode_start=gpu.episode_start,
            open_episode_workload=gpu.episode_workload,
        )

    # -- restart --------------------------------------------------------------------------

    def restore(self) -> None:
        """Rebuild in-memory state from the ledger after a start or a crash."""
        with self._lock:
            cursors = self.ledger.cursors()
            for record in self.ledger.gpus():
                info = msgspec.json.decode(record.info_json, type=GpuInfo)
                gpu = self._track(info, record.node)
                cursor = cursors.get(info.uuid)
                if cursor is not None:
                    gpu.restore(
                        _SAMPLE_DECODER.decode(cursor.last_sample),
                        cursor.open_episode_start,
                        cursor.open_episode_workload,
                    )
            replayed = 0
            for batch_id, body in self.ledger.pending_batches():
                replayed += self._buffer(batch_id, _BATCH_DECODER.decode(body), replay=True)
            if replayed:
                log.info("restored %d acknowledged samples not yet applied", replayed)

    # -- views ----------------------------------------------------------------------------

    def fleet(self, now: float | None = None) -> list[GpuView]:
        at = self.clock() if now is None else now
        with self._lock:
            views = [gpu.view(at, self.rules) for gpu in self._gpus.values()]
        return sorted(views, key=lambda v: (v.node, v.index, v.uuid))

    def node_labels(self) -> dict[str, dict[str, str]]:
        """Each node's labels from its latest batch (``region`` places it on the grid)."""
        with self._lock:
            return {node: dict(labels) for node, labels in self._node_labels.items()}

    def buffered_samples(self) -> int:
        with self._lock:
            return sum(gpu.buffered for gpu in self._gpus.values())

    # -- recommendations -------------------------------------------------------------------

    def evaluate_if_due(self, now: float | None = None) -> list[Recommendation]:
        """Re-evaluate recommendations when an evaluation interval has passed (event time)."""
        at = self.clock() if now is None else now
        interval = self.settings.analysis.evaluation_interval_seconds
        if self._evaluated_at is not None and at - self._evaluated_at < interval:
            return []
        return self.evaluate(at)

    def evaluate(self, now: float) -> list[Recommendation]:
        """Compute the desired recommendations, reconcile with the stored ones, store changes."""
        analysis = self.settings.analysis
        lookback = now - analysis.pricing_lookback_seconds
        desired = evaluate(
            self.fleet(now),
            self.ledger.workload_profiles(now),
            self.ledger.model_usage(lookback, now),
            self.accountant.prices,
            self._carbon_context(now),
            analysis,
            now,
            self._policy,
        )
        changed = reconcile(
            self.ledger.recommendations(None), desired, now, analysis.resolve_after_seconds
        )
        if changed:
            self.ledger.upsert_recommendations(changed)
        self._evaluated_at = now
        return changed

    def _carbon_context(self, now: float) -> CarbonContext:
        default = self.accountant.intensity_at(self.accountant.carbon.region, now)
        per_node = {
            node: self.accountant.intensity_at(self.accountant.region_of(node, labels), now)
            for node, labels in self._node_labels.items()
        }
        return CarbonContext(self.accountant.carbon.pue, default, per_node)

    # -- the CollectorBackend the HTTP edge calls -----------------------------------------

    def record_rejection(self, reason: RejectReason, samples: int) -> None:
        self.stats.count_rejected(reason, samples)

    def workloads(self, start: float, end: float) -> list[WorkloadReport]:
        with self._lock:
            # an ongoing episode counts up to the GPU's last applied sample, not to ``end``,
            # once it is as long as a closed one must be (analysis.min_episode_seconds)
            shortest = self.rules.min_episode_seconds
            open_episodes = [
                dataclasses.replace(e, end=g.applied_until)
                for g in self._gpus.values()
                if (e := g.open_episode()) and g.applied_until - e.start >= shortest
            ]
        return reports.workload_reports(
            self.ledger, start, end, open_episodes, self.accountant.workload_models(),
            self.accountant.currency,
        )  # fmt: skip

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
        with self._lock:
            lag = max(
                (g.newest.timestamp - g.applied_until for g in self._gpus.values()
                 if g.newest is not None and g.last is not None),
                default=0.0,
            )  # fmt: skip
        return HealthReport(
            ledger_ok=ok,
            last_ingest_at=self.stats.last_ingest_at,
            lag_seconds=lag,
            pending_samples=self.buffered_samples(),
            detail=detail,
        )

    def fleet_totals(self) -> FleetTotals:
        totals = reports.LedgerTotals.read(self.ledger, self.accountant.workload_models())
        return FleetTotals(
            currency=self.accountant.currency,
            waste=tuple(reports.waste_totals(totals)),
            energy=tuple(reports.energy_totals(totals)),
            ingest=self.stats.snapshot(),
        )
