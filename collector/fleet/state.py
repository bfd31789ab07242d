"""Per-GPU state fed by ingest: orders samples, cuts them into intervals, tracks idle episodes.

``TrackedGpu`` holds one GPU's reorder buffer and the last applied reading. ``apply_ready``
turns every reading that is past the reorder window into an ``Interval`` (from the previous
reading to this one) plus idle-episode changes. It does no I/O: the applier accounts the
intervals and commits them to the ledger together with the GPU's new cursor.

The buffer keeps a ``Reading`` per sample (collector/fleet/readings.py), not the decoded
``GpuSample``.
"""

from __future__ import annotations

import bisect
import math
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field

from agent.model import GpuInfo, GpuSample
from collector.analysis.energy import interval_energy
from collector.analysis.idle import classify_activity
from collector.fleet.health import health_of, recent_xids, saw_xids
from collector.fleet.holder_idle import HolderIdle
from collector.fleet.idle_run import IdleRun
from collector.fleet.ordering import Backfill, window_ready
from collector.fleet.readings import Holders, Reading
from collector.fleet.rules import FleetRules
from collector.fleet.view import view_of
from collector.records import (
    IDLE,
    UNKNOWN,
    Activity,
    GpuHealth,
    GpuState,
    GpuView,
    IdleEpisode,
    Interval,
)

_timestamp = operator.attrgetter("timestamp")


@dataclass(slots=True)
class Applied:
    """What applying one GPU's ready readings produced."""

    intervals: list[Interval] = field(default_factory=list)
    episodes_closed: list[IdleEpisode] = field(default_factory=list)
    samples: list[Reading] = field(default_factory=list)
    late: int = 0
    #: intervals whose energy counter said more than the GPU can draw (estimated instead)
    implausible: int = 0


@dataclass(slots=True)
class TrackedGpu:
    info: GpuInfo
    node: str
    model: str
    #: the share of its model's price this GPU carries (a MIG slice's share of its
    #: parent, a MIG parent's unpartitioned remainder; collector/analysis/mig_price.py)
    price_fraction: float = 1.0
    last: Reading | None = None  # last applied reading
    newest: Reading | None = None  # newest received reading (may still be buffered)
    episode_start: float | None = None
    episode_workload: str | None = None
    #: readings from here on are another host's (the GPU moved nodes): no interval
    #: reaches back across it, one board's counter is never subtracted from another's
    series_from: float = -math.inf
    #: whether this GPU ever reported DRAM activity; without it (a replayed duty-cycle
    #: trace, an old GPU) idle is decided on SM activity alone
    dram_seen: bool = False
    #: buffered readings in event-time order (equal timestamps in arrival order)
    _buffer: list[Reading] = field(default_factory=list)
    _holders: Holders | None = None
    #: (dram_seen, threshold, activity) of ``last``, so a reading is classified once
    _last_activity: tuple[bool, float, Activity] | None = None
    #: the idle run as of the newest reading (the view's ``idle_since``); None: rebuild it
    _run: IdleRun | None = None
    #: when this GPU's samples last arrived (collector clock; None: unknown)
    arrived_at: float | None = None
    #: what the buffer waits for before applying past a hole (fleet/ordering.py)
    backfill: Backfill = field(default_factory=Backfill)
    #: the most this GPU can draw (analysis/physical.py): its energy counter's bound
    max_power_watts: float = math.inf
    #: a shared GPU's holders idle on their own, and since when (applied readings)
    holder_idle: HolderIdle = field(default_factory=HolderIdle)
    #: the newest sample's health facts and each recent XID's last sighting (node clock;
    #: None: none), per GPU, not per reading (collector/fleet/health.py)
    health: GpuHealth | None = None
    xids: dict[int, float] | None = None

    @property
    def applied_until(self) -> float:
        return self.last.timestamp if self.last is not None else float("-inf")

    def buffer(self, sample: GpuSample, rules: FleetRules | None = None) -> bool:
        """Queue a sample; False when it is older than what was already applied (too late)."""
        return self.buffer_all((sample,), rules)[0] == 1

    def buffer_all(
        self,
        samples: Iterable[GpuSample],
        rules: FleetRules | None = None,
        arrived_at: float | None = None,
    ) -> tuple[int, float]:
        """Queue this GPU's samples of a batch that arrived at ``arrived_at`` (collector
        clock); those older than what was already applied are too late and dropped.
        Returns how many were queued and the newest queued timestamp (-inf when none).
        With ``rules``, the idle run follows them."""
        applied = self.last.timestamp if self.last is not None else -math.inf
        newest = self.newest
        newest_ts = newest.timestamp if newest is not None else -math.inf
        queue = self._buffer
        run = self._run if self._run is not None and self._run.rules == rules else None
        accepted, batch_newest = 0, -math.inf
        newest_sample = None
        for sample in samples:
            ts = sample.timestamp
            if ts <= applied:
                continue
            if sample.dram_activity is not None:
                self.dram_seen = True
            reading = self.reading(sample)
            if sample.xid_errors:
                self.xids = saw_xids(self.xids, sample.xid_errors, ts)
            if not queue or ts >= queue[-1].timestamp:
                queue.append(reading)  # the usual case: samples arrive in order
                if run is None or run.dram_seen != self.dram_seen:
                    run = None  # the view rebuilds it
                elif ts > run.last:
                    run.follow(ts, reading.holders.key, self._is_idle(reading, run.rules))
            else:
                bisect.insort_right(queue, reading, key=_timestamp)
                run = None  # out of order: the view rebuilds the run
            if ts > newest_ts:
                newest_ts, newest, newest_sample = ts, reading, sample
            if ts > batch_newest:
                batch_newest = ts
            accepted += 1
        self.newest = newest
        self._run = run
        if newest_sample is not None:
            self.health = health_of(self.health, newest_sample)
        if accepted and arrived_at is not None:
            self.arrived_at = max(arrived_at, self.arrived_at or -math.inf)
        return accepted, batch_newest

    def reading(self, sample: GpuSample) -> Reading:
        """The slim reading of ``sample``, sharing this GPU's current holders if they fit."""
        holders = self._holders
        if holders is None or not holders.fit(sample):
            holders = self._holders = Holders.of(sample)
        return Reading(
            sample.timestamp,
            sample.sm_activity,
            sample.dram_activity,
            sample.power_watts,
            sample.energy_joules,
            sample.memory_used_bytes,
            sample.memory_total_bytes,
            sample.healthy,
            holders,
        )

    def restore(self, last: GpuSample, episode_start: float | None, episode: str | None) -> None:
        """Resume after a restart from the cursor's last applied sample and open episode."""
        self.last = self.newest = self.reading(last)
        self.episode_start, self.episode_workload = episode_start, episode
        self._run = None

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def apply_ready(
        self, rules: FleetRules, flush: bool = False, now: float | None = None
    ) -> Applied:
        """Apply buffered readings past the reorder window (all when ``flush``), up to a
        hole that batches still on their way may fill (fleet/ordering.py). ``now`` is the
        collector's clock: without it, readings are judged by event time alone and holes
        are not held."""
        out = Applied()
        queue = self._buffer
        if not queue or self.newest is None:
            return out
        if flush:
            ready = len(queue)
        else:
            ready = window_ready(queue, self.newest.timestamp, self.arrived_at, now, rules)
            if ready and now is not None:
                last = self.last.timestamp if self.last is not None else None
                ready = self.backfill.ready(self._buffer, ready, last, now, rules)
            if not ready:
                return out
        self._apply(queue[:ready], rules, out)
        del queue[:ready]
        return out

    def _apply(self, readings: list[Reading], rules: FleetRules, out: Applied) -> None:
        """Cut ``readings`` (in order) into intervals and idle-episode changes.

        Runs once per sample: the GPU's fields are read into locals once per call."""
        threshold, stale = rules.idle_threshold, rules.stale_after_seconds
        shortest = rules.min_episode_seconds
        dram_unsupported = not self.dram_seen
        uuid, node, model = self.info.uuid, self.node, self.model
        intervals, samples = out.intervals, out.samples
        prev = self.last
        prev_activity = UNKNOWN if prev is None else self._last_classified(prev, threshold)
        series_from, max_watts = self.series_from, self.max_power_watts
        for reading in readings:
            ts = reading.timestamp
            if prev is not None and ts <= prev.timestamp:
                out.late += 1  # a duplicate timestamp
                continue
            # the GPU moved nodes here: a new series starts, like after a gap
            moved = prev is not None and prev.timestamp < series_from <= ts
            activity = classify_activity(reading, threshold, dram_unsupported=dram_unsupported)
            gap_ok = prev is not None and not moved and ts - prev.timestamp <= stale
            if prev is not None and not moved:
                joules, estimated, implausible = interval_energy(
                    prev, reading, max_watts, not gap_ok
                )
                if implausible:
                    out.implausible += 1
                intervals.append(
                    Interval(  # positional: this runs once per sample
                        uuid,
                        node,
                        model,
                        prev.timestamp,
                        ts,
                        prev_activity if gap_ok else UNKNOWN,
                        joules,
                        estimated,
                        prev.holders.shares,
                        prev.memory_used_bytes,
                        prev.sm_activity,
                        prev.holders.sharing,
                    )
                )
            if self.episode_start is not None or activity is IDLE:
                self._follow_episode(reading, activity, prev, gap_ok, out, shortest)
            if reading.holders.sharing is not None or self.holder_idle.since:
                self.holder_idle.follow(reading, activity, gap_ok, threshold)
            prev, prev_activity = reading, activity
            samples.append(reading)
        if prev is not None:
            self.last = prev
            self._last_activity = (self.dram_seen, threshold, prev_activity)

    def _follow_episode(
        self,
        reading: Reading,
        activity: Activity,
        prev: Reading | None,
        gap_ok: bool,
        out: Applied,
        shortest: float = 0.0,
    ) -> None:
        """Close the open idle episode where ``reading`` ends it; open one where it is idle.

        A closed episode shorter than ``shortest`` is not reported: a GPU serving bursty
        traffic is idle between requests many times a minute, and each gap would otherwise
        become a stored episode (its idle seconds are accounted either way)."""
        holder = reading.holders.key
        idle = activity is IDLE
        # a new holder ends the episode too: a pod placed on a GPU idle for an hour has
        # been idle for 0 s, and the hour before it came was not its waste
        if self.episode_start is not None and (
            not gap_ok or not idle or holder != self.episode_workload
        ):
            end = reading.timestamp if gap_ok or prev is None else prev.timestamp
            if end - self.episode_start >= shortest:
                out.episodes_closed.append(self._episode(end))
            self.episode_start = None
            self.episode_workload = None
        if idle and self.episode_start is None:
            self.episode_start = reading.timestamp
            self.episode_workload = holder

    def _last_classified(self, last: Reading, threshold: float) -> Activity:
        """The activity of ``last``, as classified when it was applied unless a reading
        with DRAM activity has come in since (that changes how it classifies)."""
        cached = self._last_activity
        if cached is not None and cached[0] == self.dram_seen and cached[1] == threshold:
            return cached[2]
        return self._classify(last, threshold)

    def _classify(self, reading: Reading, threshold: float) -> Activity:
        return classify_activity(reading, threshold, dram_unsupported=not self.dram_seen)

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

    def view(self, now: float, rules: FleetRules, offset_seconds: float = 0.0) -> GpuView:
        """The GPU's state at ``now`` (collector clock), from the newest reading received,
        judged on the node's clock (``offset_seconds`` ahead of the collector's); the
        view's times are on the collector's clock."""
        reading = self.newest
        if reading is None:
            return view_of(
                self.info,
                self.node,
                self.model,
                GpuState.UNKNOWN,
                None,
                None,
                price_fraction=self.price_fraction,
            )
        state = GpuState.UNKNOWN
        if now + offset_seconds - reading.timestamp <= rules.stale_after_seconds:
            activity = self._classify(reading, rules.idle_threshold)
            if activity is Activity.ACTIVE:
                state = GpuState.ACTIVE
            elif activity is Activity.IDLE:
                state = GpuState.ALLOCATED_IDLE if reading.holders.refs else GpuState.UNALLOCATED
        idle_since = self._idle_since(reading, rules) if state in _IDLE_STATES else None
        return view_of(
            self.info,
            self.node,
            self.model,
            state,
            reading,
            idle_since,
            offset_seconds=offset_seconds,
            price_fraction=self.price_fraction,
            holders_idle_since=self._holders_idle_since(reading, state, rules),
            health=self.health,
            xids=recent_xids(self.xids, now, offset_seconds) if self.xids else (),
        )

    def _holders_idle_since(
        self, newest: Reading, state: GpuState, rules: FleetRules
    ) -> dict[str, float]:
        """A shared GPU's holders idle on their own now, and since when (event time)."""
        if newest.holders.sharing is None or state is GpuState.UNKNOWN:
            return {}
        threshold = rules.idle_threshold
        buffered = ((r, self._classify(r, threshold)) for r in self._buffer)
        return self.holder_idle.now(buffered, threshold)

    def _idle_since(self, newest: Reading, rules: FleetRules) -> float | None:
        """When the idle run ending at ``newest`` (idle) began, counting buffered readings:
        followed as readings arrive in order; rebuilt from the applied state and the buffer
        after one arrived out of order or the GPU's classification changed."""
        run = self._run
        if (
            run is None
            or run.rules != rules
            or run.dram_seen != self.dram_seen
            or run.last != newest.timestamp
        ):
            run = self._run = self._rebuild_run(rules)
        return run.start

    def _rebuild_run(self, rules: FleetRules) -> IdleRun:
        """The idle run from the last applied reading (its open episode) through the buffer."""
        last = self.last.timestamp if self.last is not None else -math.inf
        run = IdleRun(rules, self.dram_seen, last, self.episode_start, self.episode_workload)
        for reading in self._buffer:
            if reading.timestamp > run.last:  # an equal timestamp is dropped when applied
                run.follow(reading.timestamp, reading.holders.key, self._is_idle(reading, rules))
        return run

    def _is_idle(self, reading: Reading, rules: FleetRules) -> bool:
        return self._classify(reading, rules.idle_threshold) is IDLE


_IDLE_STATES = (GpuState.ALLOCATED_IDLE, GpuState.UNALLOCATED)
