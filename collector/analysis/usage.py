"""Turn applied intervals of one GPU into Usage: seconds by activity, energy, cost, carbon.

The GPU's usage is the whole interval; each workload holding the GPU gets its share of
the seconds, energy, cost and carbon (``Interval.shares`` sums to 1), so the workloads'
figures add up to the GPU's whenever it is allocated. Unallocated usage is fleet overhead.

``IntervalSums`` adds up a run of intervals that share an hour and holders, so the
per-interval work is a few float additions and Usage objects are built once per run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from collector.analysis.carbon import carbon_grams
from collector.records import ACTIVE, HOUR_SECONDS, IDLE, Interval, Usage, WorkloadRef


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
    sums = IntervalSums()
    sums.add(interval, pue, intensity_g_per_kwh)
    gpu = sums.usage(price_per_gpu_hour, allocated=bool(interval.shares))
    return gpu, {ref: workload_part(gpu, share) for ref, share in interval.shares.items()}


@dataclass(slots=True)
class IntervalSums:
    """Sums over intervals of one GPU (see ``account_interval`` for the rules)."""

    active_seconds: float = 0.0
    idle_seconds: float = 0.0
    unknown_seconds: float = 0.0
    energy_joules: float = 0.0
    estimated_energy_joules: float = 0.0
    idle_energy_joules: float = 0.0
    carbon_grams: float = 0.0
    #: SM activity x seconds over the known seconds (Usage.sm_activity_seconds)
    sm_activity_seconds: float = 0.0

    def add(self, interval: Interval, pue: float, intensity_g_per_kwh: float) -> None:
        self.add_all((interval,), pue, intensity_g_per_kwh)

    def add_all(
        self, intervals: Iterable[Interval], pue: float, intensity_g_per_kwh: float
    ) -> None:
        """Add ``intervals`` at one grid intensity (a run in one hour of one region).

        Runs once per applied sample: the sums are kept in locals and added once."""
        active = idle = unknown = energy_sum = estimated = idle_energy = sm = 0.0
        for interval in intervals:
            seconds = interval.end - interval.start
            seconds = seconds if seconds > 0.0 else 0.0
            energy = interval.energy_joules
            energy = energy if energy > 0.0 else 0.0
            activity = interval.activity
            if activity is ACTIVE or activity is IDLE:
                if activity is ACTIVE:
                    active += seconds
                else:
                    idle += seconds
                    idle_energy += energy
                busy = interval.sm_activity
                if busy is not None and busy > 0.0:
                    sm += (busy if busy < 1.0 else 1.0) * seconds
            else:
                unknown += seconds
            energy_sum += energy
            if interval.energy_estimated:
                estimated += energy
        self.active_seconds += active
        self.idle_seconds += idle
        self.unknown_seconds += unknown
        self.energy_joules += energy_sum
        self.estimated_energy_joules += estimated
        self.idle_energy_joules += idle_energy
        self.carbon_grams += carbon_grams(energy_sum, pue, intensity_g_per_kwh)
        self.sm_activity_seconds += sm

    def usage(self, price_per_gpu_hour: float, *, allocated: bool) -> Usage:
        """The GPU's Usage; ``allocated``: a workload held it (idle is allocated-idle)."""
        per_second = max(0.0, price_per_gpu_hour) / HOUR_SECONDS
        idle = self.idle_seconds
        return Usage(
            active_seconds=self.active_seconds,
            idle_seconds=idle,
            allocated_idle_seconds=idle if allocated else 0.0,
            unknown_seconds=self.unknown_seconds,
            energy_joules=self.energy_joules,
            estimated_energy_joules=self.estimated_energy_joules,
            idle_energy_joules=self.idle_energy_joules,
            idle_cost=idle * per_second,
            cost=(self.active_seconds + idle) * per_second,
            carbon_grams=self.carbon_grams,
            sm_activity_seconds=self.sm_activity_seconds,
        )


def workload_part(usage: Usage, share: float) -> Usage:
    """A workload's part of the GPU's usage; for a workload allocated-idle = idle."""
    return Usage(
        active_seconds=usage.active_seconds * share,
        idle_seconds=usage.idle_seconds * share,
        allocated_idle_seconds=usage.idle_seconds * share,
        unknown_seconds=usage.unknown_seconds * share,
        energy_joules=usage.energy_joules * share,
        estimated_energy_joules=usage.estimated_energy_joules * share,
        idle_energy_joules=usage.idle_energy_joules * share,
        idle_cost=usage.idle_cost * share,
        cost=usage.cost * share,
        carbon_grams=usage.carbon_grams * share,
        sm_activity_seconds=usage.sm_activity_seconds * share,
    )


def energy_part(usage: Usage, share: float) -> Usage:
    """A workload's part of a MIG parent's energy and carbon (its seconds and cost come
    from the slice it holds)."""
    return Usage(
        energy_joules=usage.energy_joules * share,
        estimated_energy_joules=usage.estimated_energy_joules * share,
        idle_energy_joules=usage.idle_energy_joules * share,
        carbon_grams=usage.carbon_grams * share,
    )
