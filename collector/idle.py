"""Activity and idle episodes (DESIGN.md section 4): pure functions over samples.

A sample is ACTIVE when SM or DRAM activity is at or above the threshold, IDLE when both
are below it, UNKNOWN when the GPU could not say. Unknown is never idle: missing data,
an unhealthy GPU and a stale gap all end an idle episode rather than extend it.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from math import isfinite
from typing import Protocol

from collector.records import Activity, IdleEpisode


class ActivityReading(Protocol):
    """What classifying needs of a sample (an ``agent.model.GpuSample`` or a
    ``collector.fleet.Reading``)."""

    @property
    def healthy(self) -> bool: ...
    @property
    def sm_activity(self) -> float | None: ...
    @property
    def dram_activity(self) -> float | None: ...


def classify_activity(
    sample: ActivityReading, threshold: float, *, dram_unsupported: bool = False
) -> Activity:
    """ACTIVE if ``sm_activity`` or ``dram_activity`` >= ``threshold`` (either alone is
    enough); IDLE if both are known and below it; else UNKNOWN.

    Where one reading is missing and the other is below the threshold we cannot tell, so
    UNKNOWN, except that with ``dram_unsupported`` (the caller knows this device never
    reports DRAM activity, e.g. a GPU whose samples have never carried it) the decision is
    made on SM activity alone. An unhealthy sample is UNKNOWN; non-finite values count as
    missing.
    """
    if not sample.healthy:
        return Activity.UNKNOWN
    sm = sample.sm_activity
    if sm is not None and not isfinite(sm):
        sm = None
    dram = sample.dram_activity
    if dram is not None and not isfinite(dram):
        dram = None
    if (sm is not None and sm >= threshold) or (dram is not None and dram >= threshold):
        return Activity.ACTIVE
    if sm is not None and (dram is not None or dram_unsupported):
        return Activity.IDLE
    return Activity.UNKNOWN


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def typical_step_seconds(timestamps: Sequence[float], stale_after_seconds: float) -> float:
    """The median gap between consecutive samples, ignoring stale gaps; 0.0 if none."""
    gaps = [b - a for a, b in itertools.pairwise(timestamps)]
    fresh = [g for g in gaps if 0 < g <= stale_after_seconds]
    return statistics.median(fresh) if fresh else 0.0


def detect_idle_episodes(
    points: Sequence[tuple[float, Activity]],
    gpu_uuid: str,
    node: str,
    stale_after_seconds: float,
    workload_key: str | None = None,
    *,
    ongoing: bool = False,
) -> list[IdleEpisode]:
    """Idle episodes in a series of ``(timestamp, activity)`` of one GPU.

    An episode is an unbroken run of IDLE samples. It starts at its first idle sample and
    ends at the timestamp of the first ACTIVE or UNKNOWN sample that follows within
    ``stale_after_seconds``. When the run is cut by a gap longer than that, or by the end
    of the series, it ends at its last idle sample + min(typical step, stale_after): the
    last reading is credited for one sampling step, never for the gap. With ``ongoing``
    (a live series) an episode still running at the end of the series has ``end=None``.
    A lone sample gives no step, so a closed episode of zero length is dropped.
    """
    ordered = sorted(points, key=lambda p: p[0])
    step = min(typical_step_seconds([t for t, _ in ordered], stale_after_seconds),
               stale_after_seconds)  # fmt: skip
    episodes: list[IdleEpisode] = []
    start: float | None = None
    last = 0.0
    for ts, activity in ordered:
        if start is not None and ts - last > stale_after_seconds:
            episodes.append(IdleEpisode(gpu_uuid, node, start, last + step, workload_key))
            start = None
        if activity is Activity.IDLE:
            start = ts if start is None else start
            last = ts
        elif start is not None:
            episodes.append(IdleEpisode(gpu_uuid, node, start, ts, workload_key))
            start = None
    if start is not None:
        end = None if ongoing else last + step
        episodes.append(IdleEpisode(gpu_uuid, node, start, end, workload_key))
    return [e for e in episodes if e.end is None or e.end > e.start]


def longest_run_seconds(episodes: Sequence[IdleEpisode], now: float) -> float:
    """The longest episode's length in seconds (0.0 when there is none)."""
    return max((e.seconds(now) for e in episodes), default=0.0)


def idle_seconds(episodes: Sequence[IdleEpisode], now: float) -> float:
    """Total idle seconds over the episodes."""
    return math.fsum(e.seconds(now) for e in episodes)


def zero_fraction(values: Sequence[float]) -> float:
    """Fraction of values exactly equal to 0.0 (0.0 for an empty sequence)."""
    return sum(1 for v in values if v == 0.0) / len(values) if values else 0.0


@dataclass(frozen=True, slots=True)
class ZeroRun:
    """The longest run of consecutive zero samples, gaps ignored (samples are counted as
    they come, however far apart: the definition of the Alibaba SOURCE.md table)."""

    samples: int
    start: float
    end: float  # timestamp of the run's last zero sample

    @property
    def span_seconds(self) -> float:
        return self.end - self.start


def longest_zero_run(points: Sequence[tuple[float, float]]) -> ZeroRun:
    """Longest run of consecutive ``value == 0`` samples in ``(timestamp, value)`` points
    (sorted by timestamp here); the earliest wins a tie; ``ZeroRun(0, 0, 0)`` if none."""
    best = ZeroRun(0, 0.0, 0.0)
    count, start = 0, 0.0
    for ts, value in sorted(points):
        if value != 0.0:
            count = 0
            continue
        start = ts if count == 0 else start
        count += 1
        if count > best.samples:
            best = ZeroRun(count, start, ts)
    return best
