"""Workloads on a shared GPU (time-slicing, MPS, HAMi, Volcano vGPU): each holder's part of
the GPU's price, its own use, and its own idle time (DESIGN 4, MIG and shared GPUs). Pure.

**The price rule** (``price_fractions``, the one every caller uses): where every holder
declared a share (HAMi ``gpucores``, Volcano ``vgpu-cores``) and the shares sum to at most 1,
each holder carries its declared share and the rest of the GPU is unallocated; otherwise
the held time is split equally (1/n each). The parts never add up to more than the GPU.

**Own use.** A holder's SM share is the sum of its processes' ``ProcessSample.sm_share``
(NVML per-process utilisation), 0 for a holder with no process on the GPU, and unknown
(None) when no holder's process reports a share (the driver cannot say): then the
holder is judged by the GPU's activity, as an unshared GPU is. A holder whose own share is
below the idle threshold is idle while it holds its part, even while another holder keeps
the GPU busy ("holds 20 % of an H100 and used none of it for 2 h"). When the GPU itself is
idle every holder is; when its activity is unknown, so is every holder's.

Energy stays split by SM share (``energy.workload_shares``): joules follow use, price
follows what is held.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypeVar

from agent.model import GpuSample
from collector.analysis.usage import IntervalSums
from collector.records import (
    ACTIVE,
    HOUR_SECONDS,
    IDLE,
    Activity,
    SharedUse,
    Usage,
    WorkloadRef,
)

_K = TypeVar("_K")
#: declared shares summing past 1 by less than this (30 % + 70 % in floating point) fit
_ROUNDING = 1e-9


def price_fractions(declared: Mapping[_K, float | None]) -> dict[_K, float]:
    """Each holder's fraction (0..1) of its shared GPU's price (the rule above)."""
    if not declared:
        return {}
    shares = [_finite(s) for s in declared.values()]
    if all(s is not None and s >= 0 for s in shares):
        total = math.fsum(s for s in shares if s is not None)
        if total <= 1.0 + _ROUNDING:
            scale = 1.0 / total if total > 1.0 else 1.0
            return {k: min(1.0, (s or 0.0) * scale) for k, s in zip(declared, shares, strict=True)}
    equal = 1.0 / len(declared)
    return dict.fromkeys(declared, equal)


def shared_use(sample: GpuSample, refs: Mapping[str, WorkloadRef]) -> SharedUse | None:
    """The sample's SharedUse, given its holders' refs by workload key; None when the GPU
    is not shared (at most one holder, and that one declared no share of it)."""
    if not refs or (len(refs) == 1 and not any(w.gpu_share is not None for w in sample.workloads)):
        return None
    declared: dict[WorkloadRef, float | None] = dict.fromkeys(refs.values())
    for w in sample.workloads:
        if w.key in refs and w.gpu_share is not None:
            declared[refs[w.key]] = w.gpu_share
    sm: dict[WorkloadRef, float] = dict.fromkeys(refs.values(), 0.0)
    memory: dict[WorkloadRef, int | None] = dict.fromkeys(refs.values())
    # a lone holder (a declared share) is judged by the GPU's activity: it is all there is
    known = len(refs) > 1 and any(
        _finite(p.sm_share) is not None and p.workload is not None and p.workload.key in refs
        for p in sample.processes
    )
    for proc in sample.processes:
        ref = refs.get(proc.workload.key) if proc.workload is not None else None
        share = _finite(proc.sm_share)
        if ref is None:
            continue
        sm[ref] += share if share is not None and share > 0 else 0.0
        if proc.used_memory_bytes is not None:
            memory[ref] = (memory[ref] or 0) + proc.used_memory_bytes
    return SharedUse(
        fractions=price_fractions(declared),
        sm_shares={ref: min(1.0, s) if known else None for ref, s in sm.items()},
        memory_bytes=memory,
    )


def holder_activity(gpu: Activity, sm_share: float | None, threshold: float) -> Activity:
    """A holder's activity while the GPU's is ``gpu``: idle when its own SM share is known
    and below ``threshold``, else the GPU's."""
    if gpu is ACTIVE and sm_share is not None and sm_share < threshold:
        return IDLE
    return gpu


def shared_parts(
    sums: IntervalSums,
    price_per_gpu_hour: float,
    energy_shares: Mapping[WorkloadRef, float],
    use: SharedUse,
    threshold: float,
) -> dict[WorkloadRef, Usage]:
    """Each holder's Usage of a run of one shared GPU's intervals (``sums``, one SharedUse):
    seconds and cost are its fraction of the GPU's held time, by its own activity; energy,
    idle energy and carbon its SM share of the GPU's (``energy_shares``)."""
    per_second = max(0.0, price_per_gpu_hour) / HOUR_SECONDS
    parts = {}
    for ref, fraction in use.fractions.items():
        own = use.sm_shares.get(ref)
        active = sums.active_seconds if holder_activity(ACTIVE, own, threshold) is ACTIVE else 0.0
        idle = sums.active_seconds + sums.idle_seconds - active
        energy = energy_shares.get(ref, 0.0)
        parts[ref] = Usage(
            active_seconds=active * fraction,
            idle_seconds=idle * fraction,
            allocated_idle_seconds=idle * fraction,
            unknown_seconds=sums.unknown_seconds * fraction,
            energy_joules=sums.energy_joules * energy,
            estimated_energy_joules=sums.estimated_energy_joules * energy,
            idle_energy_joules=sums.idle_energy_joules * energy,
            idle_cost=idle * fraction * per_second,
            cost=(active + idle) * fraction * per_second,
            carbon_grams=sums.carbon_grams * energy,
            sm_activity_seconds=_own_sm_seconds(sums, fraction, own),
        )
    return parts


def _own_sm_seconds(sums: IntervalSums, fraction: float, own: float | None) -> float:
    """A holder's SM-seconds over what it held: its own SM share of the GPU (at most its
    fraction, so its mean over held time stays within 0..1) for every known second; the
    GPU's by its fraction where its own share is unknown."""
    if own is None:
        return sums.sm_activity_seconds * fraction
    return min(max(own, 0.0), fraction) * (sums.active_seconds + sums.idle_seconds)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
