"""Ground truth over a set of simulated GPUs: exact joules, idle intervals, who holds what.

Everything here is computed from the model (exact sums over the segment grid), never from
sampled readings, so tests can hold the pipeline to it.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent.model import Workload
from agent.sources.simulated.gpu import SimulatedGpu
from agent.sources.simulated.workloads import ActivityKind, SimJob

#: each pathology's true bottleneck, named as the collector's verdicts name theirs
#: (collector/analysis/bottleneck.py Cause); kinds absent here have none
TRUE_CAUSES: dict[ActivityKind, str] = {
    ActivityKind.DATALOADER_BOUND: "input_bound",
    ActivityKind.HOST_CPU_BOUND: "host_cpu_bound",
    ActivityKind.COMM_BOUND: "communication_bound",
    ActivityKind.MEMORY_BOUND: "memory_bandwidth_bound",
    ActivityKind.THROTTLED: "throttled",
    ActivityKind.STRAGGLER: "straggler",
    ActivityKind.FAULTED: "gpu_fault",
    ActivityKind.NO_TENSOR: "no_tensor_cores",
}


def true_cause(job: SimJob) -> str | None:
    """Why ``job`` wastes the GPUs it holds, by construction; None for a healthy job (or
    one whose waste is idleness: stuck, notebooks, inference between requests)."""
    return TRUE_CAUSES.get(job.kind)


class GroundTruth:
    """Ground-truth queries over ``gpus``; times are Unix seconds, t0 <= t1."""

    def __init__(self, gpus: Iterable[SimulatedGpu]) -> None:
        self._gpus = {gpu.info.uuid: gpu for gpu in gpus}

    def gpu(self, gpu_uuid: str) -> SimulatedGpu:
        try:
            return self._gpus[gpu_uuid]
        except KeyError:
            raise KeyError(f"no simulated GPU {gpu_uuid!r}") from None

    @property
    def gpu_uuids(self) -> list[str]:
        """Every GPU covered, nodes in order, GPUs in index order."""
        return list(self._gpus)

    @property
    def jobs(self) -> list[SimJob]:
        """Every job placed on these GPUs, once each, in placement order."""
        seen: dict[tuple[str, str], SimJob] = {}
        for gpu in self._gpus.values():
            for job in gpu.jobs:
                seen.setdefault((job.node, job.workload.key), job)
        return list(seen.values())

    def true_energy_joules(self, gpu_uuid: str, t0: float, t1: float) -> float:
        """Exact energy the GPU drew over [t0, t1], in joules."""
        gpu = self.gpu(gpu_uuid)
        return gpu.energy_since_epoch_joules(t1) - gpu.energy_since_epoch_joules(t0)

    def true_workload_energy_joules(self, workload_key: str, t0: float, t1: float) -> float:
        """Exact energy of every GPU while ``workload_key`` (Workload.key) held it."""
        total = 0.0
        for gpu in self._gpus.values():
            for job in gpu.jobs:
                if job.workload.key != workload_key:
                    continue
                start = t0 if job.start_time is None else max(t0, job.start_time)
                end = t1 if job.end_time is None else min(t1, job.end_time)
                if end > start:
                    total += self.true_energy_joules(gpu.info.uuid, start, end)
        return total

    def true_idle_intervals(
        self, gpu_uuid: str, t0: float, t1: float, threshold: float = 0.01
    ) -> list[tuple[float, float]]:
        """Maximal intervals in [t0, t1] with SM and DRAM activity both below threshold."""
        return self.gpu(gpu_uuid).idle_intervals(t0, t1, threshold)

    def true_idle_seconds(
        self,
        gpu_uuid: str,
        t0: float,
        t1: float,
        threshold: float = 0.01,
        min_episode_seconds: float = 0.0,
    ) -> float:
        """Idle seconds in [t0, t1], counting only episodes at least ``min_episode_seconds`` long.

        Episodes are clipped to [t0, t1] before their length is compared.
        """
        intervals = self.true_idle_intervals(gpu_uuid, t0, t1, threshold)
        return sum(b - a for a, b in intervals if b - a >= min_episode_seconds)

    def true_activity(self, gpu_uuid: str, time_unix: float) -> tuple[float, float]:
        """True (sm_activity, dram_activity) at ``time_unix``."""
        gpu = self.gpu(gpu_uuid)
        return gpu.activity(gpu.segment_at(time_unix))

    def holder(self, gpu_uuid: str, time_unix: float) -> Workload | None:
        """The workload holding the GPU at ``time_unix``; None when it is free."""
        job = self.gpu(gpu_uuid).job_at(time_unix)
        return job.workload if job else None

    def gpus_held_by(self, kind: ActivityKind | None, time_unix: float) -> list[str]:
        """UUIDs of GPUs held at ``time_unix`` by a job of ``kind`` (None: free GPUs)."""
        found = []
        for gpu_uuid, gpu in self._gpus.items():
            job = gpu.job_at(time_unix)
            if (job.kind if job else None) == kind:
                found.append(gpu_uuid)
        return found

    def jobs_of_kind(self, kind: ActivityKind) -> list[SimJob]:
        return [job for job in self.jobs if job.kind is kind]
