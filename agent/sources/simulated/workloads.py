"""Simulated workloads: what each kind of job does to a GPU, segment by segment.

Time is cut into segments of ``SEGMENT_SECONDS`` aligned to the simulator's epoch. Within a
segment a GPU's activity is constant; its value is a pure function of (job pattern, GPU key,
segment index), so any instant can be evaluated without replaying from the start and every
integral over time is an exact finite sum.

Idle segments have activity exactly 0.0 and busy ones at least 0.02, so the idle/active
split is the same for any idle threshold in (0, 0.02].
"""

from __future__ import annotations

import enum
import hashlib
import math
from dataclasses import dataclass

from agent.model import Workload

SEGMENT_SECONDS = 5.0

_MASK64 = (1 << 64) - 1
_DIURNAL_SECONDS = 86400.0


class ActivityKind(enum.StrEnum):
    TRAINING = "training"
    INFERENCE = "inference"
    NOTEBOOK = "notebook"
    STUCK = "stuck"
    DATALOADER_BOUND = "dataloader_bound"
    #: the pathologies of issue 24 (pathology.py gives their other signals)
    HOST_CPU_BOUND = "host_cpu_bound"
    COMM_BOUND = "comm_bound"
    MEMORY_BOUND = "memory_bound"
    THROTTLED = "throttled"
    STRAGGLER = "straggler"
    FAULTED = "faulted"
    NO_TENSOR = "no_tensor"


def mix64(x: int) -> int:
    """splitmix64's finaliser: a cheap, well-spread 64-bit hash."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def unit(key: int, n: int) -> float:
    """A uniform number in [0, 1) that depends only on (key, n); n may be negative."""
    return mix64((key ^ (n * 0xD1B54A32D192ED03)) & _MASK64) / 18446744073709551616.0


def stable_key(*parts: object) -> int:
    """A 64-bit key from text parts; stable across processes (unlike ``hash``)."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


@dataclass(frozen=True)
class JobPattern:
    """The shape of one job's activity; drawn once from the job's key.

    Periods and lengths are in segments. ``period_segments`` is the evaluation period
    (training), the think-time cell (notebook) or the sawtooth period (data-loader-bound).
    """

    kind: ActivityKind
    key: int
    period_segments: int
    burst_segments: int
    phase_segments: int
    checkpoint_period_segments: int
    checkpoint_segments: int
    load_phase_radians: float
    #: share of the GPU's memory the job holds for its whole life
    memory_fraction: float


_MEMORY_FRACTION = {
    ActivityKind.TRAINING: (0.70, 0.95),
    ActivityKind.INFERENCE: (0.40, 0.80),
    ActivityKind.NOTEBOOK: (0.10, 0.50),
    ActivityKind.STUCK: (0.20, 0.90),
    ActivityKind.DATALOADER_BOUND: (0.50, 0.80),
    ActivityKind.HOST_CPU_BOUND: (0.30, 0.60),
    ActivityKind.COMM_BOUND: (0.70, 0.90),
    ActivityKind.MEMORY_BOUND: (0.60, 0.90),
    ActivityKind.THROTTLED: (0.70, 0.90),
    ActivityKind.STRAGGLER: (0.70, 0.90),
    ActivityKind.FAULTED: (0.20, 0.60),
    ActivityKind.NO_TENSOR: (0.50, 0.80),
}


def make_pattern(kind: ActivityKind, key: int) -> JobPattern:
    """Draw a job's pattern parameters deterministically from its key."""
    low, high = _MEMORY_FRACTION[kind]
    period = {
        ActivityKind.TRAINING: 240 + int(unit(key, 1) * 240),  # eval every 20-40 min
        ActivityKind.NOTEBOOK: 120,  # 10-minute think-time cells
        ActivityKind.DATALOADER_BOUND: 6 + int(unit(key, 1) * 7),  # 30-60 s sawtooth
    }.get(kind, 1)
    return JobPattern(
        kind=kind,
        key=key,
        period_segments=period,
        burst_segments=12 + int(unit(key, 2) * 13),  # 1-2 min eval; notebook bursts <= 2 min
        phase_segments=int(unit(key, 3) * 10_000),
        checkpoint_period_segments=720,  # hourly checkpoint
        checkpoint_segments=6 + int(unit(key, 4) * 7),
        load_phase_radians=unit(key, 5) * 2.0 * math.pi,
        memory_fraction=low + (high - low) * unit(key, 6),
    )


def segment_activity(
    pattern: JobPattern, gpu_key: int, segment: int, time_unix: float, lagging: bool = False
) -> tuple[float, float]:
    """(sm_activity, dram_activity) of a GPU running ``pattern`` during ``segment``.

    ``time_unix`` is the segment's start, used for the inference diurnal cycle. Job-level
    structure (evaluation dips, notebook bursts) comes from the job key, so the GPUs of a
    multi-GPU job dip together; the noise comes from the GPU key. ``lagging`` marks the
    straggler GPU of a STRAGGLER job (its peers wait for it).
    """
    kind = pattern.kind
    if kind is ActivityKind.STUCK or kind is ActivityKind.FAULTED:
        return 0.0, 0.0
    u = unit(gpu_key, segment)
    v = unit(gpu_key ^ 0x5BD1E995, segment)
    if kind in _STEADY:
        return _steady(kind, u, v, lagging)
    if kind is ActivityKind.TRAINING:
        return _training(pattern, segment, u, v)
    if kind is ActivityKind.INFERENCE:
        return _inference(pattern, time_unix, u, v)
    if kind is ActivityKind.NOTEBOOK:
        return _notebook(pattern, segment, u, v)
    return _dataloader_bound(pattern, segment, u)


#: (sm low, sm span, dram low, dram span) of the pathologies whose activity is steady
_STEADY_LEVELS = {
    ActivityKind.HOST_CPU_BOUND: (0.12, 0.06, 0.05, 0.05),  # starved: a 2-core cpu.max
    ActivityKind.COMM_BOUND: (0.25, 0.10, 0.15, 0.10),  # waiting on all-reduce
    ActivityKind.MEMORY_BOUND: (0.30, 0.10, 0.80, 0.15),  # HBM saturated
    ActivityKind.THROTTLED: (0.90, 0.08, 0.40, 0.20),  # busy, at a lowered clock
    ActivityKind.STRAGGLER: (0.45, 0.10, 0.20, 0.10),  # peers waiting for the slow one
    ActivityKind.NO_TENSOR: (0.85, 0.10, 0.40, 0.20),  # busy on FP32 pipes
}
_STEADY = frozenset(_STEADY_LEVELS)


def _steady(kind: ActivityKind, u: float, v: float, lagging: bool) -> tuple[float, float]:
    sm_low, sm_span, dram_low, dram_span = _STEADY_LEVELS[kind]
    if lagging:  # the straggler works flat out, at a thermally lowered clock
        sm_low, sm_span = 0.93, 0.05
    return sm_low + sm_span * u, dram_low + dram_span * v


def _training(p: JobPattern, segment: int, u: float, v: float) -> tuple[float, float]:
    position = segment + p.phase_segments
    if position % p.checkpoint_period_segments < p.checkpoint_segments:
        return 0.03 + 0.05 * u, 0.10 + 0.10 * v  # checkpoint write: low but never idle
    if position % p.period_segments < p.burst_segments:
        return 0.30 + 0.20 * u, 0.20 + 0.15 * v  # evaluation
    return 0.85 + 0.13 * u, 0.45 + 0.25 * v


def _inference(p: JobPattern, time_unix: float, u: float, v: float) -> tuple[float, float]:
    angle = 2.0 * math.pi * time_unix / _DIURNAL_SECONDS + p.load_phase_radians
    load = 0.5 + 0.4 * math.sin(angle)
    if u >= 0.2 + 0.75 * load:
        return 0.0, 0.0  # between requests
    sm = 0.15 + 0.75 * load * v
    return sm, 0.6 * sm


def _notebook(p: JobPattern, segment: int, u: float, v: float) -> tuple[float, float]:
    position = segment + p.phase_segments
    cell, offset = divmod(position, p.period_segments)
    if unit(p.key, cell) >= 0.3:
        return 0.0, 0.0  # nobody ran a cell in these ten minutes
    start = int(unit(p.key ^ 0x1F, cell) * (p.period_segments - p.burst_segments))
    length = 1 + int(unit(p.key ^ 0x2F, cell) * p.burst_segments)
    if start <= offset < start + length:
        return 0.30 + 0.60 * u, 0.10 + 0.40 * v
    return 0.0, 0.0


def _dataloader_bound(p: JobPattern, segment: int, u: float) -> tuple[float, float]:
    position = (segment + p.phase_segments) % p.period_segments
    ramp = position / (p.period_segments - 1)
    sm = 0.20 + 0.20 * ramp + 0.01 * (u - 0.5)
    return min(0.40, max(0.20, sm)), 0.08 + 0.10 * ramp


@dataclass(frozen=True)
class SimJob:
    """A workload placed on GPUs of one node; times are Unix seconds on the segment grid."""

    workload: Workload
    pattern: JobPattern
    node: str
    gpu_indexes: tuple[int, ...]
    #: None = held since before the simulation's epoch
    start_time: float | None = None
    #: None = held past any time asked about
    end_time: float | None = None
    #: process name shown in ProcessSample.name
    process_name: str = "python"

    @property
    def kind(self) -> ActivityKind:
        return self.pattern.kind

    def holds_at(self, time_unix: float) -> bool:
        started = self.start_time is None or time_unix >= self.start_time
        return started and (self.end_time is None or time_unix < self.end_time)
