"""A simulated shared GPU: several pods on one board at once (time-slicing, or HAMi with
declared core shares), each with its own activity, as NVML shows it.

Each pod runs its job's pattern; time-slicing gives each pod its part of the board in turn,
so a pod's own SM share is its activity scaled down when together they would pass 100 %,
and the board's activity is the sum. NVML lists one process per pod with that share
(``ProcessSample.sm_share``, whole percent like nvmlDeviceGetProcessUtilization) and the
memory it holds. Ground truth: each pod's own idle intervals (its share below the
threshold, whatever the others do), exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from agent.model import GpuSample, ProcessSample
from agent.sources.simulated.gpu import SimulatedGpu
from agent.sources.simulated.hardware import board_gain, board_power_watts, gpu_model
from agent.sources.simulated.plan import board_info, make_workload
from agent.sources.simulated.workloads import (
    ActivityKind,
    SimJob,
    make_pattern,
    segment_activity,
    stable_key,
)


@dataclass(frozen=True)
class SharedSlot:
    """One pod on a shared GPU: its job's kind and the share it declared (None: none,
    as time-slicing declares none)."""

    kind: ActivityKind
    share: float | None = None


#: a time-sliced H100 shared by three pods: one serving, one notebook, one that holds its
#: part and never uses it (``gpufleet demo`` and tests/e2e use it)
TIME_SLICED_PODS = (
    SharedSlot(ActivityKind.INFERENCE),
    SharedSlot(ActivityKind.NOTEBOOK),
    SharedSlot(ActivityKind.STUCK),
)


#: an H100 shared through HAMi by two pods that declared 30 % and 50 % of its cores (20 %
#: of it unallocated): one serving, one that never uses its part
HAMI_PODS = (SharedSlot(ActivityKind.INFERENCE, 0.3), SharedSlot(ActivityKind.STUCK, 0.5))


class SimulatedSharedGpu(SimulatedGpu):
    """A board whose jobs all hold it at once."""

    def own_activity(self, segment: int) -> dict[str, tuple[float, float]]:
        """Workload key -> the pod's own (SM share, DRAM share) during ``segment``."""
        start = self.segment_start(segment)
        raw = {
            job.workload.key: segment_activity(job.pattern, self.key, segment, start)
            for job in self.jobs
            if job.holds_at(start)
        }
        total_sm = sum(sm for sm, _ in raw.values())
        total_dram = sum(dram for _, dram in raw.values())
        sm_scale = 1.0 / total_sm if total_sm > 1.0 else 1.0
        dram_scale = 1.0 / total_dram if total_dram > 1.0 else 1.0
        return {key: (sm * sm_scale, dram * dram_scale) for key, (sm, dram) in raw.items()}

    def state(self, segment: int) -> tuple[SimJob | None, float, float, float]:
        own = self.own_activity(segment)
        sm = min(1.0, sum(s for s, _ in own.values()))
        dram = min(1.0, sum(d for _, d in own.values()))
        job = self.job_at(self.segment_start(segment))
        power = board_power_watts(self.model, self.gain, sm, dram, context=job is not None)
        return job, sm, dram, power

    def sample(self, now: float) -> GpuSample:
        start = self.segment_start(self.segment_at(now))
        held = [job for job in self.jobs if job.holds_at(start)]
        own = self.own_activity(self.segment_at(now))
        processes = tuple(self._process(job, own[job.workload.key][0]) for job in held)
        return msgspec.structs.replace(
            super().sample(now),
            memory_used_bytes=sum(p.used_memory_bytes or 0 for p in processes),
            processes=processes,
            workloads=tuple(job.workload for job in held),
        )

    def _process(self, job: SimJob, sm_share: float) -> ProcessSample:
        memory = int(self.model.memory_total_bytes * job.pattern.memory_fraction / len(self.jobs))
        return ProcessSample(
            pid=self._pids[job.workload.key],
            used_memory_bytes=memory,
            sm_share=round(sm_share * 100.0) / 100.0,
            name=job.process_name,
            workload=job.workload,
        )

    def own_idle_intervals(
        self, workload_key: str, t0: float, t1: float, threshold: float = 0.01
    ) -> list[tuple[float, float]]:
        """Maximal intervals in [t0, t1] while ``workload_key`` holds its part and its own
        SM share is below ``threshold`` (idle on its own, even with the board busy)."""

        def idle(segment: int) -> bool:
            own = self.own_activity(segment).get(workload_key)
            return own is not None and own[0] < threshold

        return self.intervals_where(t0, t1, idle)


def build_shared_gpu(
    node: str,
    index: int,
    model_key: str,
    slots: Sequence[SharedSlot],
    seed: int,
    epoch: float,
) -> SimulatedSharedGpu:
    """GPU ``index`` of ``node``, shared by one pod per slot (time-slicing, or HAMi where
    a slot declares a share)."""
    model = gpu_model(model_key)
    jobs = tuple(_pod_job(node, index, number, slot, seed) for number, slot in enumerate(slots))
    return SimulatedSharedGpu(
        board_info(node, index, model, seed),
        model,
        gain=board_gain(f"{seed}/{node}/{index}/gain"),
        key=stable_key(seed, node, index, "noise"),
        epoch=epoch,
        jobs=jobs,
    )


def _pod_job(node: str, index: int, number: int, slot: SharedSlot, seed: int) -> SimJob:
    place = 200 + index * 10 + number  # apart from plan_jobs' and the MIG slices' slots
    workload = msgspec.structs.replace(
        make_workload(slot.kind, False, seed, node, place),
        gpu_sharing="time_slicing" if slot.share is None else "hami",
        gpu_share=slot.share,
    )
    return SimJob(
        workload=workload,
        pattern=make_pattern(slot.kind, stable_key(seed, node, place, "pattern")),
        node=node,
        gpu_indexes=(index,),
        process_name="python",
    )


def build_shared_node(name: str, seed: int, epoch: float) -> list[SimulatedSharedGpu]:
    """The GPUs of the example shared node: GPU 0 time-sliced by ``TIME_SLICED_PODS``,
    GPU 1 shared through HAMi by ``HAMI_PODS`` (``gpufleet demo --shared``, tests/e2e)."""
    return [
        build_shared_gpu(name, 0, "H100", TIME_SLICED_PODS, seed, epoch),
        build_shared_gpu(name, 1, "H100", HAMI_PODS, seed, epoch),
    ]
