"""Activity (DESIGN.md section 4) and the zero-run figures of recorded traces: pure functions.

A sample is ACTIVE when SM or DRAM activity is at or above the threshold, IDLE when both
are below it, UNKNOWN when the GPU could not say. Unknown is never idle: missing data,
an unhealthy GPU and a stale gap all end an idle episode rather than extend it. Idle
episodes themselves are tracked, sample by sample, in fleet.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import isfinite
from typing import Protocol

from collector.records import ACTIVE, IDLE, UNKNOWN, Activity


class ActivityReading(Protocol):
    """What classifying needs of a sample (an ``agent.model.GpuSample`` or a
    ``collector.fleet.readings.Reading``)."""

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
        return UNKNOWN
    sm = sample.sm_activity
    if sm is not None and not isfinite(sm):
        sm = None
    dram = sample.dram_activity
    if dram is not None and not isfinite(dram):
        dram = None
    if (sm is not None and sm >= threshold) or (dram is not None and dram >= threshold):
        return ACTIVE
    if sm is not None and (dram is not None or dram_unsupported):
        return IDLE
    return UNKNOWN


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
