"""What a GPU's reorder buffer keeps of each sample: a slim ``Reading``, and the ``Holders``
it shares with its neighbours.

A ``Reading`` has the handful of fields intervals, episodes and the fleet view need, not the
decoded ``GpuSample``; the holders (workloads, their refs and shares) are one object shared
by every consecutive reading that has the same ones. A GPU at 1 Hz holds ~45 readings (the
30 s reorder window and the 15 s apply interval), so this is most of the collector's memory
per GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from agent.model import GpuSample, ProcessSample, Workload
from collector.analysis.energy import workload_ref, workload_shares
from collector.analysis.shared import shared_use
from collector.records import SharedUse, WorkloadRef


@dataclass(frozen=True, slots=True, eq=False)
class Holders:
    """Who holds a GPU at a sample: one object shared by consecutive readings with the
    same workloads (and, where several split the GPU, the same processes)."""

    workloads: tuple[Workload, ...]
    #: the processes, kept only where the split depends on them (several workloads)
    processes: tuple[ProcessSample, ...]
    refs: tuple[WorkloadRef, ...]
    #: ``energy.workload_shares`` of the sample; shared, never mutate it
    shares: dict[WorkloadRef, float]
    #: the first workload's key: whose idle episode it is (None: unallocated)
    key: str | None
    #: each holder's part of a shared GPU (analysis/shared.py); None: not shared
    sharing: SharedUse | None = None

    @classmethod
    def of(cls, sample: GpuSample) -> Holders:
        workloads = sample.workloads
        shares = workload_shares(sample)
        return cls(
            workloads=workloads,
            processes=sample.processes if len(workloads) > 1 else (),
            refs=tuple(workload_ref(w) for w in workloads),
            shares=shares,
            key=workloads[0].key if workloads else None,
            sharing=shared_use(sample, {ref.key: ref for ref in shares}) if workloads else None,
        )

    def fit(self, sample: GpuSample) -> bool:
        """Whether ``sample`` has these holders (and, if shared, these processes)."""
        if sample.workloads != self.workloads:
            return False
        return len(self.workloads) <= 1 or sample.processes == self.processes


class Reading(msgspec.Struct, frozen=True, gc=False):
    """What intervals, idle episodes and the view need of one ``GpuSample`` (SI units,
    None = the GPU could not say). gc=False: it never takes part in a reference cycle."""

    timestamp: float
    sm_activity: float | None
    dram_activity: float | None
    power_watts: float | None
    energy_joules: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    healthy: bool
    holders: Holders

    def to_sample(self, gpu_uuid: str) -> GpuSample:
        """A GpuSample with this reading's fields (the ledger cursor's format)."""
        return GpuSample(
            timestamp=self.timestamp,
            gpu_uuid=gpu_uuid,
            sm_activity=self.sm_activity,
            dram_activity=self.dram_activity,
            power_watts=self.power_watts,
            energy_joules=self.energy_joules,
            memory_used_bytes=self.memory_used_bytes,
            memory_total_bytes=self.memory_total_bytes,
            healthy=self.healthy,
            workloads=self.holders.workloads,
            processes=self.holders.processes,
        )
