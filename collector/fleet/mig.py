"""MIG: a MIG-enabled GPU's energy, price share and state, from its slices (DESIGN 4).

The parent reports power and the energy counter (NVML has none per instance); each slice
reports its own activity and holders. Every interval of the parent is split among its
slices' holders by the slices' activity *in that interval* (the reading in force at the
interval's start), not by the slices' latest readings. The parent's state in the fleet
view is its slices' (a parent whose slices are all held is allocated, never unallocated).
"""

from __future__ import annotations

import bisect
import math
import operator
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

import msgspec

from agent.model import Batch, GpuInfo
from collector.analysis.energy import split_mig_energy
from collector.analysis.idle import classify_activity
from collector.analysis.mig_price import unpartitioned_fraction
from collector.fleet.readings import Reading
from collector.fleet.rules import FleetRules
from collector.fleet.state import TrackedGpu
from collector.records import (
    ACTIVE,
    IDLE,
    UNKNOWN,
    Activity,
    GpuState,
    GpuView,
    Interval,
    WorkloadRef,
)

_timestamp = operator.attrgetter("timestamp")
#: a slice's readings kept for its parent's split, at most (a parent that stopped
#: reporting must not grow it without bound; ~1 h at 1 Hz)
MAX_SLICE_HISTORY = 4096


class MigLayouts:
    """Each MIG parent's slices now (its state and price) and every slice it ever had,
    with the readings its split needs (in event time: a re-partition counts from when
    it happened, whatever was buffered first). ``slice_fraction_of`` gives a slice's
    share of its parent's price. The live fleet's lock guards it."""

    def __init__(self, slice_fraction_of: Callable[[GpuInfo], float]) -> None:
        self._slice_fraction_of = slice_fraction_of
        self._slices: dict[str, set[str]] = {}
        self._split_slices: dict[str, set[str]] = {}
        self._histories: dict[str, SliceHistory] = {}

    def track(self, gpu: TrackedGpu, gpus: Mapping[str, TrackedGpu]) -> None:
        """``gpu`` is new or changed: set its share of the price, and its parent's."""
        info = gpu.info
        parent: TrackedGpu | None = gpu if info.mig_enabled else None
        if info.mig_parent_uuid is not None:
            gpu.price_fraction = self._slice_fraction_of(info)
            self._slices.setdefault(info.mig_parent_uuid, set()).add(info.uuid)
            self._split_slices.setdefault(info.mig_parent_uuid, set()).add(info.uuid)
            self._histories.setdefault(info.uuid, SliceHistory())
            parent = gpus.get(info.mig_parent_uuid)
        if parent is not None:
            self._price_parent(parent, gpus)

    def forget(self, uuids: Collection[str]) -> None:
        """Drop forgotten GPUs, as parents and as slices (collector/fleet/live.py)."""
        for uuid in uuids:
            self._slices.pop(uuid, None)
            self._split_slices.pop(uuid, None)
            self._histories.pop(uuid, None)
        for book in (self._slices, self._split_slices):
            for slices in book.values():
                slices.difference_update(uuids)

    def follow(self, batch: Batch, gpus: Mapping[str, TrackedGpu]) -> None:
        """A MIG parent's slices are those its node lists with it now: after the GPU is
        re-partitioned, its old slices count no more for its state or price, nor for its
        split from the batch's first sample on."""
        listed = {info.uuid: set[str]() for info in batch.gpus if info.mig_enabled}
        for info in batch.gpus:
            if info.mig_parent_uuid in listed:
                listed[info.mig_parent_uuid].add(info.uuid)
        since = min((s.timestamp for s in batch.samples), default=batch.sent_at)
        for parent_uuid, uuids in listed.items():
            if self._slices.get(parent_uuid) == uuids:
                continue
            for uuid in self._split_slices.get(parent_uuid, set()):
                self._histories[uuid].gone_from = math.inf if uuid in uuids else since
            self._slices[parent_uuid] = uuids
            self._price_parent(gpus[parent_uuid], gpus)

    def _price_parent(self, parent: TrackedGpu, gpus: Mapping[str, TrackedGpu]) -> None:
        slices = self._slices.get(parent.info.uuid, set())
        parent.price_fraction = unpartitioned_fraction(
            gpus[u].price_fraction for u in slices if u in gpus
        )

    def applied(self, gpu: TrackedGpu, before: Reading | None, readings: Sequence[Reading]) -> None:
        """A slice applied ``readings``; ``before`` was in force until the first (after a
        restart: the cursor's)."""
        history = self._histories.get(gpu.info.uuid)
        if history is None:
            return
        if not history.readings and before is not None:
            history.extend((before,))
        history.extend(readings)

    def split(self, parent: TrackedGpu, intervals: Iterable[Interval], rules: FleetRules) -> None:
        """The parent's applied ``intervals``: split among its slices' holders, and the
        board's activity from its slices."""
        uuids = self._split_slices.get(parent.info.uuid)
        if not uuids:
            return
        slices = [(u, self._histories[u]) for u in sorted(uuids)]
        split_parent_intervals(intervals, slices, rules.stale_after_seconds, rules.idle_threshold)
        for _, history in slices:
            history.forget_before(parent.applied_until)

    def parent_views(self, views: dict[str, GpuView]) -> None:
        """Each parent's view, in place, with its state from its slices now."""
        for parent, slices in self._slices.items():
            if (view := views.get(parent)) is not None:
                views[parent] = parent_view(view, [views[u] for u in sorted(slices)])


class SliceHistory:
    """One slice's applied readings in event time, from the one in force where its parent
    was last applied: what the parent's next intervals are split by."""

    __slots__ = ("gone_from", "readings")

    def __init__(self) -> None:
        self.readings: list[Reading] = []
        #: the slice is no more from this event time on (its GPU was re-partitioned)
        self.gone_from = math.inf

    def extend(self, readings: Sequence[Reading]) -> None:
        self.readings.extend(readings)
        if len(self.readings) > MAX_SLICE_HISTORY:
            del self.readings[: len(self.readings) - MAX_SLICE_HISTORY]

    def at(self, timestamp: float, stale_seconds: float) -> Reading | None:
        """The reading in force at ``timestamp``: the newest at or before it; None once
        the slice is gone, or when that reading is older than ``stale_seconds`` (the
        slice stopped reporting)."""
        if timestamp >= self.gone_from:
            return None
        i = bisect.bisect_right(self.readings, timestamp, key=_timestamp)
        reading = self.readings[i - 1] if i else None
        return reading if reading and timestamp - reading.timestamp <= stale_seconds else None

    def forget_before(self, timestamp: float) -> None:
        """Drop readings the parent no longer needs: all but the one in force at
        ``timestamp`` and those after it."""
        i = bisect.bisect_right(self.readings, timestamp, key=_timestamp)
        if i > 1:
            del self.readings[: i - 1]


def split_parent_intervals(
    intervals: Iterable[Interval],
    slices: Sequence[tuple[str, SliceHistory]],
    stale_seconds: float,
    threshold: float,
) -> None:
    """Set each parent interval's ``shares`` and ``activity`` from its slices' readings
    in force at the interval's start (a slice whose reading then is staler than
    ``stale_seconds`` has no part). Shares: the slices' holders, each slice weighted by
    its SM activity (equally when none is known; DESIGN 4); a slice nobody holds keeps
    its part unallocated, so they may sum to less than 1. Activity: the board's, from
    its slices (active if any is, unknown if any is, else idle), so a parent without an
    activity reading of its own (NVML under MIG without GPM) is not "unknown"; a gap
    stays unknown. Intervals with the same slice readings share one dict, so the
    accountant sums them as one run."""
    cache: dict[tuple[object, ...], tuple[dict[WorkloadRef, float], Activity]] = {}
    for interval in intervals:
        start = interval.start
        state = [(uuid, r) for uuid, h in slices if (r := h.at(start, stale_seconds)) is not None]
        if not state:
            continue
        key = tuple(
            (uuid, r.sm_activity, r.dram_activity, r.healthy, id(r.holders)) for uuid, r in state
        )
        found = cache.get(key)
        if found is None:
            found = cache[key] = (_shares(state), _activity(state, threshold))
        interval.shares = found[0]
        if interval.end - start <= stale_seconds:
            interval.activity = found[1]


def _activity(state: Sequence[tuple[str, Reading]], threshold: float) -> Activity:
    # a slice without DRAM activity in a reading is judged on SM activity alone, as a
    # device that never reports it is
    found = {
        classify_activity(r, threshold, dram_unsupported=r.dram_activity is None) for _, r in state
    }
    for activity in (ACTIVE, UNKNOWN):
        if activity in found:
            return activity
    return IDLE


def _shares(state: Sequence[tuple[str, Reading]]) -> dict[WorkloadRef, float]:
    parts = split_mig_energy(1.0, [(uuid, r.sm_activity) for uuid, r in state])
    shares: dict[WorkloadRef, float] = {}
    for uuid, reading in state:
        part = parts.get(uuid, 0.0)
        for ref, share in reading.holders.shares.items():
            shares[ref] = shares.get(ref, 0.0) + part * share
    return shares


def parent_view(parent: GpuView, slices: Sequence[GpuView]) -> GpuView:
    """The parent's view with its state from its slices: active when any is, unknown when
    any is (nothing can be said of the whole), else allocated-idle when any is held, else
    unallocated; idle since the last of its slices went idle. Without slices: as is."""
    if not slices:
        return parent
    states = {v.state for v in slices}
    idle_since: float | None = None
    if GpuState.ACTIVE in states:
        state = GpuState.ACTIVE
    elif GpuState.UNKNOWN in states:
        state = GpuState.UNKNOWN
    else:
        held = GpuState.ALLOCATED_IDLE in states
        state = GpuState.ALLOCATED_IDLE if held else GpuState.UNALLOCATED
        starts = [v.idle_since for v in slices]
        idle_since = None if None in starts else max(s for s in starts if s is not None)
    return _replace(parent, state, idle_since)


def _replace(view: GpuView, state: GpuState, idle_since: float | None) -> GpuView:
    return msgspec.structs.replace(view, state=state, idle_since=idle_since)
