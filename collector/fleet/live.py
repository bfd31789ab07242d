"""The live fleet: every tracked GPU, each node's labels, and which stored batches still
have samples waiting to be applied.

Ingest writes here (``buffer``) and nothing here calls back: the applier takes what is
ready (``apply_ready``) and commits it; readers take views (``views``). One lock guards
it all; ``lock`` is held by the applier across applying and accounting, so a GPU's
identity cannot change under the accountant.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
import math
import threading
from collections.abc import Callable, Iterator
from typing import NamedTuple

from agent.model import Batch, GpuInfo, GpuSample
from collector.analysis.work_window import WorkloadWindow
from collector.backend import ImplausibleField, LateReason
from collector.fleet.anomalies import Anomalies
from collector.fleet.claims import CLAIM_HOLD_SECONDS, DuplicateClaims, PublishedHolders
from collector.fleet.clocks import NodeClocks
from collector.fleet.limits import Breach, FleetBounds, FleetLimits, GroupTally
from collector.fleet.mig import MigLayouts
from collector.fleet.rules import FleetRules
from collector.fleet.state import Applied, TrackedGpu
from collector.fleet.windows import WorkloadWindows
from collector.records import DuplicateGpu, GpuView, IdleEpisode

log = logging.getLogger(__name__)


class Buffered(NamedTuple):
    """What buffering a batch took: its samples ``accepted``, those ``late`` (behind event
    time already applied), and the sentence telling the sender why (None: none late)."""

    accepted: int
    late: int = 0
    warning: str | None = None


class LiveFleet:
    """The per-GPU state of every node. ``model_of`` names a GPU's model for pricing;
    ``count_late(samples, reason)`` is told of samples that came too late to apply;
    ``slice_fraction_of`` gives a MIG slice's share of its parent's price (1.0: whole);
    ``max_power_of`` the most a GPU can draw (analysis/physical.py; None: unbounded), and
    ``count_implausible(field, samples)`` of values not taken as measured past it;
    ``limits`` bound what it holds (collector/fleet/limits.py)."""

    def __init__(
        self,
        rules: FleetRules,
        model_of: Callable[[GpuInfo], str],
        count_late: Callable[[int, LateReason], None],
        slice_fraction_of: Callable[[GpuInfo], float] | None = None,
        clock_correction_min_seconds: float = 0.0,
        max_power_of: Callable[[GpuInfo], float] | None = None,
        count_implausible: Callable[[ImplausibleField, int], None] | None = None,
        limits: FleetLimits | None = None,
        windows: WorkloadWindows | None = None,
    ) -> None:
        self.rules = rules
        self.lock = threading.RLock()
        self._model_of = model_of
        #: the most a GPU can draw: ingest refuses a power above it, and the energy
        #: counter's deltas are held to it
        self.max_power_of = max_power_of or (lambda _: math.inf)
        #: each node's clock against the collector's, measured by ingest
        self.clocks = NodeClocks(clock_correction_min_seconds)
        self._anomalies = Anomalies(
            count_late, count_implausible or (lambda _f, _n: None), self.clocks.offset
        )
        self._gpus: dict[str, TrackedGpu] = {}
        self._mig = MigLayouts(slice_fraction_of or (lambda _: 1.0))
        self.duplicates = DuplicateClaims()
        self.bounds = FleetBounds(limits or FleetLimits())
        self._node_labels: dict[str, dict[str, str]] = {}
        #: pending batch id -> how many of its GPUs still have samples to apply
        self._pending: dict[int, int] = {}
        #: gpu uuid -> heap of (newest sample timestamp in a pending batch, batch id)
        self._waiting: dict[str, list[tuple[float, int]]] = {}
        #: pending batches now fully applied, not yet committed as done
        self._done: list[int] = []
        #: what the bottleneck verdicts read: each holder's recent minutes (issue 24)
        self.windows = windows or WorkloadWindows()
        #: a replica's front: who has each GPU by what the owners published (it buffers
        #: nothing itself); None where this fleet applies what it accepts
        self.published: PublishedHolders | None = None
        #: bumped by every change a reader could see (a batch buffered, samples applied,
        #: GPUs forgotten, a duplicate refused): the read views' cache key (http/views.py)
        self.version = 0

    # -- ingest's side --------------------------------------------------------------------

    def refuse_duplicate(
        self, batch: Batch, received_at: float, claimed: dict[str, str]
    ) -> list[tuple[int, DuplicateGpu]]:
        """The GPUs of ``batch`` (with their index in ``batch.gpus``) that another node
        still has, each recorded as refused; empty when the batch may be taken. A node
        has a GPU while its newest reading is within ``CLAIM_HOLD_SECONDS`` of the
        batch's newest sample, or when ``claimed`` (uuid -> node, the batches taken so
        far in this group) says; on a replica's front, while its shard's owner published
        it (``published``)."""
        newest = max((s.timestamp for s in batch.samples), default=batch.sent_at)
        found = []
        with self.lock:
            for i, info in enumerate(batch.gpus):
                owner = claimed.get(info.uuid) or self._holder(info.uuid, newest)
                if owner is None and self.published is not None:
                    owner = self.published.holder(info.uuid, received_at)
                if owner is not None and owner != batch.node:
                    dup = self.duplicates.refuse(info.uuid, owner, batch.node, received_at)
                    found.append((i, dup))
            self.version += bool(found)
        return found

    def refuse_past_limits(self, batch: Batch, at: float, tally: GroupTally) -> Breach | None:
        """The bound ``batch`` would pass (collector/fleet/limits.py ``FleetBounds.check``),
        counting this fleet's GPUs, or on a replica's front the ones the owners publish."""
        with self.lock:
            if self.published is not None:
                known, on_node = self.published.placement()
                return self.bounds.check(batch, known, at, tally, on_node)
            return self.bounds.check(batch, self._gpus, at, tally)

    def _holder(self, uuid: str, newest: float) -> str | None:
        """The node that has ``uuid`` as of event time ``newest``: it reported the GPU
        within ``CLAIM_HOLD_SECONDS`` (or later: a clone replaying older samples)."""
        gpu = self._gpus.get(uuid)
        if gpu is None or gpu.newest is None:
            return None
        return gpu.node if newest - gpu.newest.timestamp <= CLAIM_HOLD_SECONDS else None

    def buffer(
        self,
        batch_id: int,
        batch: Batch,
        replay: bool = False,
        received_at: float | None = None,
    ) -> Buffered:
        """Buffer a stored batch's samples, received at ``received_at`` (collector clock;
        None: unknown); returns how many were taken, and how many were too late. Those
        too late are counted and logged once per node and streak (until a batch of the
        node has none), except on ``replay`` after a restart (a pending batch's samples
        applied before the crash)."""
        with self.lock:
            self.version += 1
            self._node_labels[batch.node] = dict(batch.node_labels)
            if received_at is not None:
                self.bounds.heard_from(batch, received_at)
            moved = {i.uuid for i in batch.gpus if self._moves(i.uuid, batch.node)}
            for info in batch.gpus:
                self.track(info, batch.node)
            self._mig.follow(batch, self._gpus)
            by_gpu: dict[str, list[GpuSample]] = {}
            for sample in batch.samples:
                group = by_gpu.get(sample.gpu_uuid)
                if group is None:
                    by_gpu[sample.gpu_uuid] = [sample]
                else:
                    group.append(sample)
            accepted = gpus = 0
            behind = 0.0  # how far the latest late sample is behind its GPU's applied time
            for uuid, samples in by_gpu.items():
                gpu = self._gpus.get(uuid)
                if gpu is None:
                    continue
                if uuid in moved:
                    # moved (silent on its old node past the claim hold): another host's
                    # counter and clock start here; no interval reaches back across it
                    gpu.series_from = min(s.timestamp for s in samples)
                self.windows.observe(batch.node, gpu.model, samples, gpu.applied_until)
                queued, newest = gpu.buffer_all(samples, self.rules, received_at)
                if queued < len(samples):
                    oldest = min(s.timestamp for s in samples)
                    behind = max(behind, gpu.applied_until - oldest)
                if queued:
                    applied = gpu.last is not None
                    gpu.backfill.note_batch(applied, batch.agent_boot_id, batch.seq, received_at)
                    accepted += queued
                    gpus += 1
                    heapq.heappush(self._waiting.setdefault(uuid, []), (newest, batch_id))
            self.windows.observe_hosts(batch.hosts)
            if gpus:
                self._pending[batch_id] = gpus
            else:
                self._done.append(batch_id)
            late = len(batch.samples) - accepted
            if replay:
                return Buffered(accepted)
            if not late:
                self._anomalies.on_time(batch.node)
                return Buffered(accepted)
            return Buffered(accepted, late, self._anomalies.late(batch, late, behind))

    def track(self, info: GpuInfo, node: str) -> TrackedGpu:
        """The GPU's state, created or updated to ``info`` on ``node``."""
        with self.lock:
            gpu = self._gpus.get(info.uuid)
            if gpu is None or gpu.info != info or gpu.node != node:
                model = self._model_of(info)
                self.bounds.placed(info.uuid, gpu.node if gpu else None, node)
                if gpu is None:
                    gpu = TrackedGpu(info=info, node=node, model=model)
                    self._gpus[info.uuid] = gpu
                else:  # a GPU moved or its identity changed (driver update): keep history
                    gpu.info, gpu.node, gpu.model = info, node, model
                gpu.max_power_watts = self.max_power_of(info)
                self._mig.track(gpu, self._gpus)
            return gpu

    def _moves(self, uuid: str, node: str) -> bool:
        gpu = self._gpus.get(uuid)
        return gpu is not None and gpu.node != node

    # -- the applier's side (with ``lock`` held) ------------------------------------------

    def apply_ready(self, flush: bool, now: float) -> Iterator[tuple[TrackedGpu, Applied]]:
        """Each GPU's readings past the reorder window (all on ``flush``), applied: MIG
        parents after their instances, whose holders get the parent's energy interval by
        interval. Yields only GPUs that applied samples; the caller holds ``lock`` while
        it iterates."""
        mig_parents = []
        for gpu in self._gpus.values():
            if gpu.info.mig_enabled:
                mig_parents.append(gpu)
            elif gpu.buffered:
                before = gpu.last  # after a restart: the cursor's, in force until the next
                if (result := self._apply(gpu, flush, now)) is None:
                    continue
                self._mig.applied(gpu, before, result.samples)
                self.version += 1
                yield gpu, result
        for gpu in mig_parents:
            if gpu.buffered and (result := self._apply(gpu, flush, now)) is not None:
                self.version += 1
                yield gpu, result

    def _apply(self, gpu: TrackedGpu, flush: bool, now: float) -> Applied | None:
        result = gpu.apply_ready(self.rules, flush=flush, now=now)
        if gpu.info.mig_enabled:
            self._mig.split(gpu, result.intervals, self.rules)
        if result.late:
            self._anomalies.duplicates(result.late)
        if result.implausible:
            info, watts = gpu.info, gpu.max_power_watts
            self._anomalies.implausible_energy(info.uuid, gpu.node, result.implausible, watts)
        if result.samples or result.late:
            self._release(gpu)
        return result if result.samples else None

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

    def forget_silent(self, now: float) -> list[str]:
        """GPUs not heard of for ``forget_after_seconds`` (collector clock) and with
        nothing left to apply leave the live fleet, with their claims, MIG layouts and,
        once a node has none left, its labels and clock; returns their uuids."""
        with self.lock:
            idle = [u for u, g in self._gpus.items() if not g.buffered and not self._waiting.get(u)]
            gone = {u: self._gpus.pop(u).node for u in self.bounds.silent(idle, now)}
            nodes = self.bounds.forget(gone, now)  # and workloads and label values unseen
            if gone:
                self.version += 1
                self._waiting = {u: w for u, w in self._waiting.items() if u not in gone}
                self._mig.forget(gone)
                self.clocks.forget(nodes)
                self.duplicates.forget(gone, nodes)
                for node in nodes:
                    self._node_labels.pop(node, None)
                    self._anomalies.on_time(node)
                log.info("forgot %d silent GPUs, %d nodes with them", len(gone), len(nodes))
            return list(gone)

    def done_batches(self) -> list[int]:
        """Pending batches now fully applied (``forget_done`` once committed)."""
        return list(self._done)

    def forget_done(self, count: int) -> None:
        """The first ``count`` done batches are committed."""
        del self._done[:count]

    def gpu(self, uuid: str) -> TrackedGpu:
        return self._gpus[uuid]

    def labels_of(self, node: str) -> dict[str, str]:
        return self._node_labels.get(node, {})

    # -- readers --------------------------------------------------------------------------

    def views(self, now: float) -> list[GpuView]:
        """Every GPU and MIG instance with its state at ``now``, by node and index."""
        offset = self.clocks.offset
        with self.lock:
            views = {
                uuid: gpu.view(now, self.rules, offset(gpu.node))
                for uuid, gpu in self._gpus.items()
            }
            self._mig.parent_views(views)
        return sorted(views.values(), key=lambda v: (v.node, v.index, v.uuid))

    def workload_windows(self, now: float) -> list[WorkloadWindow]:
        """Each holder's recent GPUs and host (collector/fleet/windows.py), for the
        bottleneck verdicts."""
        with self.lock:
            return self.windows.windows(now)

    def node_labels(self) -> dict[str, dict[str, str]]:
        """Each node's labels from its latest batch (``region`` places it on the grid)."""
        with self.lock:
            return {node: dict(labels) for node, labels in self._node_labels.items()}

    def buffered_samples(self) -> int:
        with self.lock:
            return sum(gpu.buffered for gpu in self._gpus.values())

    def lag_seconds(self) -> float:
        """How far the newest received sample is ahead of the last applied one, at most."""
        with self.lock:
            return max(
                (
                    g.newest.timestamp - g.applied_until
                    for g in self._gpus.values()
                    if g.newest is not None and g.last is not None
                ),
                default=0.0,
            )

    def open_episodes(self) -> list[IdleEpisode]:
        """Ongoing idle episodes, each up to its GPU's last applied sample, once it is as
        long as a closed one must be (``min_episode_seconds``)."""
        shortest = self.rules.min_episode_seconds
        with self.lock:
            return [
                dataclasses.replace(e, end=g.applied_until)
                for g in self._gpus.values()
                if (e := g.open_episode()) and g.applied_until - e.start >= shortest
            ]
