"""Per-GPU state fed by ingest: orders samples, cuts them into intervals, tracks idle episodes.

``TrackedGpu`` holds one GPU's reorder buffer and the last applied sample. ``apply_ready``
turns every sample that is past the reorder window into an ``Interval`` (from the previous
sample to this one) plus idle-episode changes. It does no I/O: the pipeline accounts the
intervals and commits them to the ledger together with the GPU's new cursor.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from agent.model import GpuInfo, GpuSample
from collector.energy import interval_energy, workload_ref, workload_shares
from collector.idle import classify_activity
from collector.records import Activity, GpuState, GpuView, IdleEpisode, Interval


@dataclass(frozen=True, slots=True)
class FleetRules:
    idle_threshold: float
    stale_after_seconds: float
    reorder_window_seconds: float


@dataclass(slots=True)
class Applied:
    """What applying one GPU's ready samples produced."""

    intervals: list[Interval] = field(default_factory=list)
    episodes_closed: list[IdleEpisode] = field(default_factory=list)
    samples: list[GpuSample] = field(default_factory=list)
    late: int = 0


@dataclass(slots=True)
class TrackedGpu:
    info: GpuInfo
    node: str
    model: str
    last: GpuSample | None = None  # last applied sample
    newest: GpuSample | None = None  # newest received sample (may still be buffered)
    episode_start: float | None = None
    episode_workload: str | None = None
    #: whether this GPU ever reported DRAM activity; without it (a replayed duty-cycle
    #: trace, an old GPU) idle is decided on SM activity alone
    dram_seen: bool = False
    _heap: list[tuple[float, int, GpuSample]] = field(default_factory=list)
    _counter: int = 0

    @property
    def applied_until(self) -> float:
        return self.last.timestamp if self.last is not None else float("-inf")

    def buffer(self, sample: GpuSample) -> bool:
        """Queue a sample; False when it is older than what was already applied (too late)."""
        if sample.timestamp <= self.applied_until:
            return False
        self._counter += 1
        if sample.dram_activity is not None:
            self.dram_seen = True
        heapq.heappush(self._heap, (sample.timestamp, self._counter, sample))
        if self.newest is None or sample.timestamp > self.newest.timestamp:
            self.newest = sample
        return True

    @property
    def buffered(self) -> int:
        return len(self._heap)

    def apply_ready(self, rules: FleetRules, flush: bool = False) -> Applied:
        """Apply buffered samples older than the reorder window (all when ``flush``)."""
        out = Applied()
        if not self._heap or self.newest is None:
            return out
        horizon = float("inf") if flush else self.newest.timestamp - rules.reorder_window_seconds
        while self._heap and self._heap[0][0] <= horizon:
            _, _, sample = heapq.heappop(self._heap)
            if sample.timestamp <= self.applied_until:
                out.late += 1  # a duplicate timestamp
                continue
            self._apply(sample, rules, out)
        return out

    def _apply(self, sample: GpuSample, rules: FleetRules, out: Applied) -> None:
        prev = self.last
        activity = self._classify(sample, rules)
        gap_ok = prev is not None and sample.timestamp - prev.timestamp <= rules.stale_after_seconds
        holder = sample.workloads[0].key if sample.workloads else None
        if prev is not None:
            out.intervals.append(self._interval(prev, sample, gap_ok, rules))
        # a new holder ends the episode too: a pod placed on a GPU idle for an hour has
        # been idle for 0 s, and the hour before it came was not its waste
        ended = not gap_ok or activity is not Activity.IDLE or holder != self.episode_workload
        if self.episode_start is not None and ended:
            end = sample.timestamp if gap_ok or prev is None else prev.timestamp
            out.episodes_closed.append(self._episode(end))
            self.episode_start = None
            self.episode_workload = None
        if activity is Activity.IDLE and self.episode_start is None:
            self.episode_start = sample.timestamp
            self.episode_workload = holder
        self.last = sample
        out.samples.append(sample)

    def _interval(
        self, prev: GpuSample, cur: GpuSample, gap_ok: bool, rules: FleetRules
    ) -> Interval:
        joules, estimated = interval_energy(prev, cur)
        activity = self._classify(prev, rules) if gap_ok else Activity.UNKNOWN
        return Interval(
            gpu_uuid=self.info.uuid,
            node=self.node,
            model=self.model,
            start=prev.timestamp,
            end=cur.timestamp,
            activity=activity,
            energy_joules=joules,
            energy_estimated=estimated,
            shares=workload_shares(prev),
            memory_used_bytes=prev.memory_used_bytes,
            sm_activity=prev.sm_activity,
        )

    def _classify(self, sample: GpuSample, rules: FleetRules) -> Activity:
        return classify_activity(sample, rules.idle_threshold, dram_unsupported=not self.dram_seen)

    def _episode(self, end: float | None) -> IdleEpisode:
        assert self.episode_start is not None
        return IdleEpisode(
            gpu_uuid=self.info.uuid,
            node=self.node,
            start=self.episode_start,
            end=end,
            workload_key=self.episode_workload,
        )

    def open_episode(self) -> IdleEpisode | None:
        return None if self.episode_start is None else self._episode(None)

    def view(
        self, now: float, rules: FleetRules, workload_refs: tuple[object, ...] = ()
    ) -> GpuView:
        """The GPU's state now, from the newest sample received."""
        sample = self.newest
        fresh = sample is not None and now - sample.timestamp <= rules.stale_after_seconds
        state = GpuState.UNKNOWN
        refs = tuple(workload_ref(w) for w in sample.workloads) if sample is not None else ()
        if sample is not None and fresh:
            activity = self._classify(sample, rules)
            if activity is Activity.ACTIVE:
                state = GpuState.ACTIVE
            elif activity is Activity.IDLE:
                state = GpuState.ALLOCATED_IDLE if refs else GpuState.UNALLOCATED
        return GpuView(
            uuid=self.info.uuid,
            node=self.node,
            index=self.info.index,
            model=self.model,
            name=self.info.name,
            state=state,
            last_seen=sample.timestamp if sample is not None else None,
            workloads=refs,
            idle_since=self.episode_start if state in _IDLE_STATES else None,
            sm_activity=sample.sm_activity if sample is not None else None,
            dram_activity=sample.dram_activity if sample is not None else None,
            power_watts=sample.power_watts if sample is not None else None,
            memory_used_bytes=sample.memory_used_bytes if sample is not None else None,
            memory_total_bytes=(sample.memory_total_bytes if sample is not None else None)
            or self.info.memory_total_bytes,
            mig_parent_uuid=self.info.mig_parent_uuid,
            mig_profile=self.info.mig_profile,
            healthy=sample.healthy if sample is not None else True,
        )


_IDLE_STATES = (GpuState.ALLOCATED_IDLE, GpuState.UNALLOCATED)
