"""Energy per interval and its attribution to workloads (DESIGN.md section 4).

Energy comes from the NVML energy counter where it can: the delta between two samples.
A decrease is a driver reload; it never becomes a negative delta. Where the counter
cannot say, power is integrated and the result marked estimated; so it is where the
counter says more than the GPU can draw (a jump: collector/analysis/physical.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from math import isfinite
from typing import Protocol

from agent.model import (
    SLURM_ACCOUNT_LABEL,
    SLURM_PARTITION_LABEL,
    GpuSample,
    Workload,
    WorkloadKind,
)
from collector.analysis.physical import ENERGY_SLACK_SECONDS
from collector.records import OWNER_LABEL, PRIORITY_CLASS_LABEL, QUEUE_LABEL, WorkloadRef


class EnergyReading(Protocol):
    """What energy needs of a sample (an ``agent.model.GpuSample`` or a
    ``collector.fleet.readings.Reading``)."""

    @property
    def timestamp(self) -> float: ...
    @property
    def energy_joules(self) -> float | None: ...
    @property
    def power_watts(self) -> float | None: ...


def interval_energy(
    prev: EnergyReading, cur: EnergyReading, max_watts: float = math.inf, gap: bool = False
) -> tuple[float, bool, bool]:
    """Joules used between two consecutive samples of one GPU that draws at most
    ``max_watts`` (analysis/physical.py), whether estimated, and whether the counter was
    refused as implausible.

    - both counters present and ``cur >= prev``: the counter delta (exact), unless it is
      more than the GPU can draw in the interval and ``ENERGY_SLACK_SECONDS``: a counter
      that jumped is no measurement, and the interval is estimated from power, as below;
    - the counter went down (driver reload) or one is missing: power integration,
      estimated: trapezoid when both powers are known, a rectangle of the one known
      power otherwise;
    - across a ``gap`` (an interval longer than ``analysis.stale_after_seconds``, unknown)
      without a counter delta: 0.0, estimated. Two powers say nothing of the time between
      them; integrating them over an outage, or over the jump of a node clock that stepped
      back (its samples sorted out of true order, the counter going down), would invent
      energy (issue 17: 4x the true joules across a clock stepped back an hour);
    - no power either, or time did not advance: 0.0, estimated.
    """
    e0, e1 = prev.energy_joules, cur.energy_joules
    seconds = cur.timestamp - prev.timestamp
    implausible = False
    if e0 is not None and e1 is not None and e1 >= e0 and isfinite(e0) and isfinite(e1):
        if e1 - e0 <= max_watts * (seconds + ENERGY_SLACK_SECONDS):
            return e1 - e0, False, False
        implausible = True
    if seconds <= 0 or gap:
        return 0.0, True, implausible
    p0, p1 = _power(prev), _power(cur)
    if p0 is not None and p1 is not None:
        return (p0 + p1) / 2.0 * seconds, True, implausible
    known = p0 if p0 is not None else p1
    return (known * seconds if known is not None else 0.0), True, implausible


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _power(sample: EnergyReading) -> float | None:
    watts = _finite(sample.power_watts)
    return watts if watts is not None and watts >= 0 else None


def workload_ref(w: Workload) -> WorkloadRef:
    """The collector's view of a workload: its key plus the labels reports group by.

    ``namespace`` is the k8s namespace; a Slurm job without one takes its account label
    (else its partition label) where the agent sends it."""
    labels = w.labels
    namespace = (
        w.namespace or labels.get(SLURM_ACCOUNT_LABEL) or labels.get(SLURM_PARTITION_LABEL) or ""
    )
    return WorkloadRef(
        key=w.key,
        kind=w.kind.value,
        name=w.name or w.slurm_job_id or w.id,
        namespace=namespace,
        team=w.team or labels.get("team", ""),
        user=w.user or "",
        owner=labels.get(OWNER_LABEL) or _job_owner(w),
        queue=labels.get(QUEUE_LABEL, ""),
        priority_class=labels.get(PRIORITY_CLASS_LABEL, ""),
    )


def _job_owner(w: Workload) -> str:
    """A Slurm job's owner is the user who submitted it (``User/alice``); "" unknown."""
    return f"User/{w.user}" if w.kind is WorkloadKind.SLURM_JOB and w.user else ""


def workload_shares(sample: GpuSample) -> dict[WorkloadRef, float]:
    """How this sample's GPU is split among the workloads holding it; sums to 1.

    One workload: all of it. Several: in proportion to the SM share of their processes
    (``ProcessSample.sm_share`` of processes whose workload has the same key); an equal
    split when no share is known or all are zero. Nobody: ``{}`` (fleet overhead).
    """
    refs: dict[str, WorkloadRef] = {}
    for w in sample.workloads:
        refs.setdefault(w.key, workload_ref(w))
    if len(refs) <= 1:
        return {ref: 1.0 for ref in refs.values()}
    weights = dict.fromkeys(refs, 0.0)
    for proc in sample.processes:
        share = _finite(proc.sm_share)
        if proc.workload is not None and proc.workload.key in weights and share and share > 0:
            weights[proc.workload.key] += share
    total = math.fsum(weights.values())
    if total <= 0:
        return {ref: 1.0 / len(refs) for ref in refs.values()}
    return {refs[key]: weight / total for key, weight in weights.items()}


def split_mig_energy(
    parent_joules: float, instances: Sequence[tuple[str, float | None]]
) -> dict[str, float]:
    """Split a MIG parent's energy among its instances, given as (uuid, sm_activity), in
    proportion to their SM activity; equally when none is known or all are zero. The
    parts sum to ``parent_joules`` (the last absorbs rounding) and are never negative."""
    uuids = list(dict.fromkeys(uuid for uuid, _ in instances))
    if not uuids:
        return {}
    activity = dict.fromkeys(uuids, 0.0)
    for uuid, sm in instances:
        value = _finite(sm)
        if value is not None and value > 0:
            activity[uuid] += value
    total = math.fsum(activity.values())
    weights = {u: (a / total if total > 0 else 1.0 / len(uuids)) for u, a in activity.items()}
    parts = {u: parent_joules * w for u, w in weights.items()}
    last = uuids[-1]
    parts[last] = max(0.0, parent_joules - math.fsum(v for u, v in parts.items() if u != last))
    return parts
