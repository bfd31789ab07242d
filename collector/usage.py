"""Turn one applied interval of one GPU into Usage: seconds by activity, energy, cost, carbon.

The GPU's usage is the whole interval; each workload holding the GPU gets its share of
the seconds, energy, cost and carbon (``Interval.shares`` sums to 1), so the workloads'
figures add up to the GPU's whenever it is allocated. Unallocated usage is fleet overhead.
"""

from __future__ import annotations

from collector.carbon import carbon_grams
from collector.records import HOUR_SECONDS, Activity, Interval, Usage, WorkloadRef


def account_interval(
    interval: Interval, price_per_gpu_hour: float, pue: float, intensity_g_per_kwh: float
) -> tuple[Usage, dict[WorkloadRef, Usage]]:
    """The GPU's Usage for ``interval`` and each holding workload's share of it.

    Seconds go to active, idle or unknown by ``interval.activity``; idle seconds held by
    a workload are also allocated-idle. ``cost`` covers the known (active or idle)
    seconds at ``price_per_gpu_hour``; unknown seconds cost nothing here because we cannot
    say the GPU was there to be paid for. ``idle_cost`` is the idle seconds' part.
    Energy is the interval's whatever the activity (the counter is real even when
    activity is unknown); carbon = energy x PUE x intensity. A backwards interval counts
    as zero seconds; negative energy as zero.
    """
    gpu = _gpu_usage(interval, price_per_gpu_hour, pue, intensity_g_per_kwh)
    return gpu, {ref: _scaled(gpu, share) for ref, share in interval.shares.items()}


def _gpu_usage(interval: Interval, price: float, pue: float, intensity: float) -> Usage:
    seconds = max(0.0, interval.seconds)
    energy = max(0.0, interval.energy_joules)
    active = seconds if interval.activity is Activity.ACTIVE else 0.0
    idle = seconds if interval.activity is Activity.IDLE else 0.0
    unknown = seconds if interval.activity is Activity.UNKNOWN else 0.0
    per_second = max(0.0, price) / HOUR_SECONDS
    return Usage(
        active_seconds=active,
        idle_seconds=idle,
        allocated_idle_seconds=idle if interval.shares else 0.0,
        unknown_seconds=unknown,
        energy_joules=energy,
        estimated_energy_joules=energy if interval.energy_estimated else 0.0,
        idle_energy_joules=energy if interval.activity is Activity.IDLE else 0.0,
        idle_cost=idle * per_second,
        cost=(active + idle) * per_second,
        carbon_grams=carbon_grams(energy, pue, intensity),
    )


def _scaled(usage: Usage, share: float) -> Usage:
    """A workload's part of the GPU's usage; for a workload allocated-idle = idle."""
    part = Usage(**{name: getattr(usage, name) * share for name in Usage.__slots__})
    part.allocated_idle_seconds = part.idle_seconds
    return part
