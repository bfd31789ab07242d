"""Applying: the live fleet's ready samples, accounted into one ledger write, committed
every ``ingest.commit_interval_seconds``; and, after a start or a crash, the live fleet
rebuilt from the ledger. GPUs silent past ``ingest.forget_after_seconds`` leave the live
fleet at a tick with nothing left to commit, and a restart does not bring them back.

``tick`` applies every sample past the reorder window and accounts the intervals (energy,
idle, cost, carbon per GPU and workload) into the write in progress; when a commit is due
it commits that write, the GPUs' cursors and the batches now fully applied in one
transaction, then tells the observers. A failed commit keeps its deltas: the next tick
commits them with its own. ``restore`` is the inverse: cursors say what was committed;
pending batches hold what was acknowledged but not committed.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

import msgspec

from agent.model import Batch, GpuInfo, GpuSample
from collector.accounting.accountant import Accountant
from collector.fleet.live import LiveFleet
from collector.fleet.state import TrackedGpu
from collector.ledger.observers import Observers
from collector.ledger.store import GpuCursor, Ledger, LedgerWrite

log = logging.getLogger(__name__)
_SAMPLE_DECODER = msgspec.json.Decoder(GpuSample)
_SAMPLE_ENCODER = msgspec.json.Encoder()
_BATCH_DECODER = msgspec.json.Decoder(Batch)


class Applier:
    def __init__(
        self,
        fleet: LiveFleet,
        accountant: Accountant,
        ledger: Ledger,
        observers: Observers,
        commit_interval_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.fleet = fleet
        self.accountant = accountant
        self.ledger = ledger
        self.observers = observers
        self.commit_interval_seconds = commit_interval_seconds
        self.clock = clock
        #: what was applied since the last commit (kept, and added to, while one fails)
        self._unsaved = LedgerWrite()
        #: GPUs whose cursor moved since the last commit
        self._moved: set[str] = set()
        self._committed_at = -math.inf

    def tick(self, flush: bool = False, commit: bool = False) -> int:
        """Apply ready samples; commit what was applied when ``commit_interval_seconds``
        has passed since the last commit, or ``commit``, or ``flush`` (which also applies
        every buffered sample). Returns the number applied."""
        now = self.clock()
        fleet, accountant, write = self.fleet, self.accountant, self._unsaved
        applied = 0
        with fleet.lock:
            for gpu, result in fleet.apply_ready(flush, now):
                accountant.account(gpu, result, fleet.labels_of(gpu.node), write)
                self._moved.add(gpu.info.uuid)
                if (record := accountant.gpu_record(gpu)) is not None:
                    write.gpus[gpu.info.uuid] = record
                applied += len(result.samples)
            due = now - self._committed_at >= self.commit_interval_seconds
            if (self._moved or fleet.done_batches()) and (flush or commit or due):
                self._commit(now)
            if not self._moved:  # a forgotten GPU's cursor is committed first
                accountant.forget_gpus(fleet.forget_silent(now))
        return applied

    def _commit(self, now: float) -> None:
        write = self._unsaved
        for uuid in self._moved:
            write.cursors[uuid] = _cursor(self.fleet.gpu(uuid))
        write.batches_done = self.fleet.done_batches()
        self.ledger.commit(write)  # on LedgerError all of it stays for the next tick
        self.fleet.forget_done(len(write.batches_done))
        self._unsaved, self._moved, self._committed_at = LedgerWrite(), set(), now
        self.observers.write_committed(write)

    def restore(self) -> None:
        """Rebuild the live fleet from the ledger after a start or a crash. A GPU whose
        last applied sample is older than ``forget_after_seconds`` is not brought back
        (its history stays in the ledger)."""
        fleet, ledger = self.fleet, self.ledger
        horizon = self.clock() - fleet.bounds.limits.forget_after_seconds
        with fleet.lock:
            cursors = ledger.cursors()
            for record in ledger.gpus():
                if record.last_seen < horizon:
                    continue
                info = msgspec.json.decode(record.info_json, type=GpuInfo)
                gpu = fleet.track(info, record.node)
                fleet.bounds.heard[info.uuid] = record.last_seen
                cursor = cursors.get(info.uuid)
                if cursor is not None:
                    gpu.restore(
                        _SAMPLE_DECODER.decode(cursor.last_sample),
                        cursor.open_episode_start,
                        cursor.open_episode_workload,
                    )
            replayed = 0
            for batch_id, body in ledger.pending_batches():
                replayed += fleet.buffer(batch_id, _BATCH_DECODER.decode(body), replay=True)
            if replayed:
                log.info("restored %d acknowledged samples not yet applied", replayed)


def _cursor(gpu: TrackedGpu) -> GpuCursor:
    assert gpu.last is not None
    return GpuCursor(
        gpu_uuid=gpu.info.uuid,
        applied_until=gpu.last.timestamp,
        last_sample=_SAMPLE_ENCODER.encode(gpu.last.to_sample(gpu.info.uuid)),
        open_episode_start=gpu.episode_start,
        open_episode_workload=gpu.episode_workload,
    )
