"""Applying: the live fleet's ready samples, accounted into one ledger write, committed
every ``ingest.commit_interval_seconds``; and, after a start or a crash, the live fleet
rebuilt from the ledger. GPUs silent past ``ingest.forget_after_seconds`` leave the live
fleet at a tick with nothing left to commit, and a restart does not bring them back.

``tick`` applies every sample past the reorder window and accounts the intervals (energy,
idle, cost, carbon per GPU and workload) into the write in progress; when a commit is due
it commits that write, the GPUs' cursors and the batches now fully applied in one
transaction, then tells the observers. A failed commit keeps its deltas: the next tick
commits them with its own (a failed commit is due again at once), and ``WriteHealth`` is
told of each outcome, so readiness and metrics say whether commits work.
``restore`` is the inverse: cursors say what was committed; pending batches hold what was
acknowledged but not committed.

A pending batch that cannot be applied (it fails ``check``: today's edge rules, whose
table bounds every value to what the ledger can store, collector/ingest/rules.py; or
buffering it raises) is quarantined at replay, not fatal and not replayed again. Poison
is stopped before it is applied because a value in the applied state cannot be taken out
again: the write accumulates many batches' samples per GPU and workload, and the live
state has moved past them. A commit that still fails on its data is reported like any
failed commit (``reason`` overflow or other) and retried; finding the batches behind it
(re-applying from the last commit without them) is not done.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping

import msgspec

from agent.model import Batch, GpuInfo, GpuSample
from collector.accounting.accountant import Accountant
from collector.fleet.live import LiveFleet
from collector.fleet.state import TrackedGpu
from collector.ledger.batch_log import LoggedBatch
from collector.ledger.observers import Observers
from collector.ledger.sql import Connection
from collector.ledger.store import GpuCursor, GpuRecord, Ledger, LedgerFenced, LedgerWrite
from collector.ledger.write_health import WriteHealth

log = logging.getLogger(__name__)
_SAMPLE_DECODER = msgspec.json.Decoder(GpuSample)
_SAMPLE_ENCODER = msgspec.json.Encoder()
_BATCH_DECODER = msgspec.json.Decoder(Batch)

#: a pending batch's JSON, its arrival time and the live fleet that will apply it -> the
#: batch, or an exception refusing it. The check measures the node's clock in that fleet
#: (the offset its views and late-sample checks correct by): a replica's shard owner
#: applies batches another replica accepted, so its fleet saw none arrive
BatchCheck = Callable[[bytes, float, LiveFleet], Batch]


def decode_only(body: bytes, received_at: float, fleet: LiveFleet) -> Batch:
    return _BATCH_DECODER.decode(body)


class Applier:
    def __init__(
        self,
        fleet: LiveFleet,
        accountant: Accountant,
        ledger: Ledger,
        observers: Observers,
        commit_interval_seconds: float,
        clock: Callable[[], float] = time.time,
        health: WriteHealth | None = None,
        fence: Callable[[Connection], bool] | None = None,
    ) -> None:
        """``fence``: checked in each commit's transaction (``Ledger.commit``)."""
        self.fence = fence
        #: a commit found the fence closed: this applier's state is another replica's now
        self.fenced = False
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
        #: when the first change still unsaved was applied (None: nothing waits)
        self._unsaved_since: float | None = None
        self.health = health or WriteHealth(clock)

    def tick(self, flush: bool = False, commit: bool = False) -> int:
        """Apply ready samples; commit what was applied when ``commit_interval_seconds``
        has passed since the last commit, or ``commit``, or ``flush`` (which also applies
        every buffered sample). Returns the number applied."""
        now = self.clock()
        fleet, accountant, write = self.fleet, self.accountant, self._unsaved
        applied = 0
        with fleet.lock:
            for gpu, result in fleet.apply_ready(flush, now):
                if self._unsaved_since is None:
                    self._unsaved_since = now
                accountant.account(gpu, result, fleet.labels_of(gpu.node), write)
                self._moved.add(gpu.info.uuid)
                if (record := accountant.gpu_record(gpu)) is not None:
                    write.gpus[gpu.info.uuid] = record
                applied += len(result.samples)
            due = now - self._committed_at >= self.commit_interval_seconds
            failing = self.health.state().commit_failure is not None
            waiting = self._moved or fleet.done_batches() or self.ledger.set_aside_pending()
            if waiting and (flush or commit or due or failing):
                self._commit(now)
            if not self._moved:  # a forgotten GPU's cursor is committed first
                accountant.forget_gpus(fleet.forget_silent(now))
        return applied

    def waiting_since(self) -> float | None:
        """When the oldest applied change not yet committed was applied (None: none)."""
        return self._unsaved_since

    def _commit(self, now: float) -> None:
        write = self._unsaved
        for uuid in self._moved:
            write.cursors[uuid] = _cursor(self.fleet.gpu(uuid))
        write.batches_done = self.fleet.done_batches()
        try:
            self.ledger.commit(write, self.fence)
        except LedgerFenced:  # another replica owns these GPUs now: it re-applies them
            self.fenced = True
            return
        except Exception as err:  # all of it stays for the next tick, which retries
            self.health.commit_failed(err)
            return
        self.health.commit_ok()
        self.fleet.forget_done(len(write.batches_done))
        self._unsaved, self._moved, self._committed_at = LedgerWrite(), set(), now
        self._unsaved_since = None
        self.observers.write_committed(write)

    def restore(self, check: BatchCheck = decode_only) -> None:
        """Rebuild the live fleet from the ledger after a start or a crash; a pending
        batch that fails ``check`` or cannot be applied is quarantined. A GPU whose last
        applied sample is older than ``forget_after_seconds`` is not brought back (its
        history stays in the ledger)."""
        ledger = self.ledger
        self.restore_from(ledger.gpus(), ledger.cursors(), ledger.pending_records(), check)

    def restore_from(
        self,
        records: Iterable[GpuRecord],
        cursors: Mapping[str, GpuCursor],
        pending: Iterable[LoggedBatch],
        check: BatchCheck = decode_only,
    ) -> None:
        """``restore`` from these GPUs, cursors and pending batches (a replica restores
        the part of the ledger in the shards it takes over: collector/replicas.py)."""
        fleet = self.fleet
        horizon = self.clock() - fleet.bounds.limits.forget_after_seconds
        with fleet.lock:
            for record in records:
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
            replayed = sum(self._replay(logged, check) for logged in pending)
            if replayed:
                log.info("restored %d acknowledged samples not yet applied", replayed)

    def take(self, logged: LoggedBatch, check: BatchCheck) -> int:
        """Buffer a pending batch another replica acknowledged (as received then); one
        that fails ``check`` or buffering is quarantined. The samples taken."""
        received_at = logged.entry.received_at
        try:
            batch = check(logged.entry.body, received_at, self.fleet)
            return self.fleet.buffer(logged.batch_id, batch, received_at=received_at).accepted
        except Exception as err:  # this batch alone
            self._set_aside(logged, f"{type(err).__name__}: {err}")
        return 0

    def _replay(self, logged: LoggedBatch, check: BatchCheck) -> int:
        try:
            received_at = logged.entry.received_at
            batch = check(logged.entry.body, received_at, self.fleet)
            # as it arrived then: a never applied GPU's first batch is this one, not the
            # next to arrive (which would wait for the batches before it, already here)
            return self.fleet.buffer(
                logged.batch_id, batch, replay=True, received_at=received_at
            ).accepted
        except Exception as err:  # this batch alone; the others are replayed
            self._set_aside(logged, f"replayed after a restart: {type(err).__name__}: {err}")
        return 0

    def _set_aside(self, logged: LoggedBatch, error: str) -> None:
        try:
            self.ledger.quarantine(logged, logged.entry.body, error, self.clock())
        except OSError as err:  # it stays in the log, and is tried again at the next start
            log.error("batch %d cannot be quarantined (%s): left pending", logged.batch_id, err)


def _cursor(gpu: TrackedGpu) -> GpuCursor:
    assert gpu.last is not None
    return GpuCursor(
        gpu_uuid=gpu.info.uuid,
        applied_until=gpu.last.timestamp,
        last_sample=_SAMPLE_ENCODER.encode(gpu.last.to_sample(gpu.info.uuid)),
        open_episode_start=gpu.episode_start,
        open_episode_workload=gpu.episode_workload,
    )
