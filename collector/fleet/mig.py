"""MIG: a MIG-enabled GPU's energy, price share and state, from its slices (DESIGN 4).

The parent reports power and the energy counter (NVML has none per instance); each slice
reports its own activity and holders. Every interval of the parent is split among its
slices' holders by the slices' activity *in that interval* (the reading in force at the
interval's start), not by the slices' latest readings. The parent's state in the fleet
view is its slices' (a parent whose slices are all held is allocated, never unallocated).
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Iterable, Sequence

from collector.analysis.energy import split_mig_energy
from collector.fleet.readings import Reading
from collector.records import GpuState, GpuView, Interval, WorkloadRef

_timestamp = operator.attrgetter("timestamp")
#: a slice's readings kept for its parent's split, at most (a parent that stopped
#: reporting must not grow it without bound; ~1 h at 1 Hz)
MAX_SLICE_HISTORY = 4096


class SliceHistory:
    """One slice's applied readings in event time, from the one in force where its parent
    was last applied: what the parent's next intervals are split by."""

    __slots__ = ("readings",)

    def __init__(self) -> None:
        self.readings: list[Reading] = []

    def extend(self, readings: Sequence[Reading]) -> None:
        self.readings.extend(readings)
        if len(self.readings) > MAX_SLICE_HISTORY:
            del self.readings[: len(self.readings) - MAX_SLICE_HISTORY]

    def at(self, timestamp: float) -> Reading | None:
        """The reading in force at ``timestamp`` (the newest at or before it)."""
        i = bisect.bisect_right(self.readings, timestamp, key=_timestamp)
        return self.readings[i - 1] if i else None

    def forget_before(self, timestamp: float) -> None:
        """Drop readings the parent no longer needs: all but the one in force at
        ``timestamp`` and those after it."""
        i = bisect.bisect_right(self.readings, timestamp, key=_timestamp)
        if i > 1:
            del self.readings[: i - 1]


def split_parent_intervals(
    intervals: Iterable[Interval], slices: Sequence[tuple[str, SliceHistory]]
) -> None:
    """Set each parent interval's ``shares``: the holders of the slices, each slice
    weighted by its SM activity in force at the interval's start (equally when none is
    known; DESIGN 4). A slice nobody holds keeps its part unallocated, so the shares may
    sum to less than 1. Intervals with the same slice readings share one dict, so the
    accountant sums them as one run."""
    cache: dict[tuple[tuple[str, float | None, int], ...], dict[WorkloadRef, float]] = {}
    for interval in intervals:
        state = [(uuid, r) for uuid, h in slices if (r := h.at(interval.start)) is not None]
        if not state:
            continue
        key = tuple((uuid, r.sm_activity, id(r.holders)) for uuid, r in state)
        shares = cache.get(key)
        if shares is None:
            shares = cache[key] = _shares(state)
        interval.shares = shares


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
    fields = {f: getattr(view, f) for f in GpuView.__slots__}
    fields.update(state=state, idle_since=idle_since)
    return GpuView(**fields)
