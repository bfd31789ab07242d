"""Simulated GPU nodes and fleets with exact ground truth.

The simulator is a model of GPU hardware (hardware.py beside it) running workloads
(workloads.py) placed like a real cluster (plan.py). ``read(now)`` is a
pure function of (seed, now): there is no internal clock, so callers run simulated time as
fast as they like and may jump anywhere. Ground truth (truth.py) is exact.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from agent.config import SourceSettings
from agent.model import GpuInfo, GpuSample, WorkloadHostSample
from agent.sources.simulated.gpu import SimulatedGpu
from agent.sources.simulated.hardware import gpu_model
from agent.sources.simulated.mig import MigLayout, build_mig_gpus
from agent.sources.simulated.pathology import host_sample
from agent.sources.simulated.plan import PATHOLOGY_FLAVOURS, Slot, build_gpus, plan_jobs
from agent.sources.simulated.truth import GroundTruth
from agent.sources.simulated.workloads import SEGMENT_SECONDS, ActivityKind, SimJob
from gpufleet.settings import ConfigError

__all__ = [
    "DEFAULT_START_TIME",
    "SEGMENT_SECONDS",
    "ActivityKind",
    "SimJob",
    "SimulatedFleet",
    "SimulatedNode",
    "build_fleet",
    "build_pathology_fleet",
]

#: 2026-01-01T00:00:00Z, the default simulation epoch
DEFAULT_START_TIME = 1_767_225_600.0
#: the node flavour a single node gets: every workload kind plus a free GPU at 8 GPUs
SINGLE_NODE_FLAVOUR = 1


class SimulatedNode(GroundTruth):
    """A GpuSource for one simulated node, plus ground truth for its GPUs."""

    def __init__(self, name: str, gpus: Sequence[SimulatedGpu]) -> None:
        super().__init__(gpus)
        self.name = name
        self.gpus = list(gpus)

    @classmethod
    def build(
        cls,
        name: str,
        models: Sequence[str],
        *,
        seed: int = 0,
        start_time: float = DEFAULT_START_TIME,
        flavour: int = SINGLE_NODE_FLAVOUR,
        flavours: Sequence[tuple[Slot, ...]] | None = None,
    ) -> SimulatedNode:
        """A node with one GPU per entry of ``models`` (keys of GPU_MODELS, e.g. "H100");
        ``flavours``: the node flavours to pick from (plan.FLAVOURS by default)."""
        gpu_models = [gpu_model(key) for key in models]
        if flavours is None:
            jobs = plan_jobs(name, len(gpu_models), flavour, seed, start_time)
        else:
            jobs = plan_jobs(name, len(gpu_models), flavour, seed, start_time, flavours)
        return cls(name, build_gpus(name, gpu_models, jobs, seed, start_time))

    @classmethod
    def build_mig(
        cls,
        name: str,
        layouts: Sequence[MigLayout],
        *,
        seed: int = 0,
        start_time: float = DEFAULT_START_TIME,
    ) -> SimulatedNode:
        """A node of MIG GPUs, one per layout: each parent followed by its slices."""
        gpus = [
            gpu
            for index, layout in enumerate(layouts)
            for gpu in build_mig_gpus(name, index, layout, seed, start_time)
        ]
        return cls(name, gpus)

    def clone(self, name: str) -> SimulatedNode:
        """Another node reporting this node's GPUs, uuids and all: a VM cloned from this
        node's image (the collector must refuse its claim, not move the GPUs)."""
        return SimulatedNode(name, self.gpus)

    @classmethod
    def from_settings(
        cls, node_name: str, settings: SourceSettings, start_time: float | None = None
    ) -> SimulatedNode:
        """The agent CLI's node: ``simulated_gpus`` GPUs cycling ``simulated_models``.

        ``start_time`` (the epoch) defaults to the wall clock now.
        """
        names = settings.simulated_models or ["H100"]
        models = [names[i % len(names)] for i in range(settings.simulated_gpus)]
        try:
            return cls.build(
                node_name,
                models,
                seed=settings.simulated_seed,
                start_time=time.time() if start_time is None else start_time,
            )
        except ValueError as err:
            raise ConfigError(f"source.simulated_models: {err}") from err

    @property
    def epoch(self) -> float:
        return self.gpus[0].epoch if self.gpus else DEFAULT_START_TIME

    def discover(self) -> list[GpuInfo]:
        return [gpu.info for gpu in self.gpus]

    def read(self, now: float) -> list[GpuSample]:
        """Every GPU's state at ``now`` (any Unix time; no replay from the start needed)."""
        return [gpu.sample(now) for gpu in self.gpus]

    def read_hosts(self, samples: Sequence[GpuSample], now: float) -> list[WorkloadHostSample]:
        """Each job holding a GPU of this node at ``now``: its host CPU and memory, as the
        agent reads them from the job's cgroup (one per job, whatever its GPU count)."""
        jobs = {job.workload.key: job for gpu in self.gpus if (job := gpu.job_at(now))}
        if not jobs:
            return []
        segment = self.gpus[0].segment_at(now)
        return [host_sample(job, segment, now) for job in jobs.values()]

    def close(self) -> None:
        """Nothing to release."""


class SimulatedFleet(GroundTruth):
    """Several simulated nodes and fleet-wide ground truth."""

    def __init__(self, nodes: Sequence[SimulatedNode]) -> None:
        super().__init__(gpu for node in nodes for gpu in node.gpus)
        self.nodes = list(nodes)

    def node_of(self, gpu_uuid: str) -> SimulatedNode:
        for node in self.nodes:
            if any(gpu.info.uuid == gpu_uuid for gpu in node.gpus):
                return node
        raise KeyError(f"no simulated GPU {gpu_uuid!r}")

    def read(self, now: float) -> dict[str, list[GpuSample]]:
        """Every node's samples at ``now``, by node name."""
        return {node.name: node.read(now) for node in self.nodes}


def build_fleet(
    nodes: int = 4,
    gpus_per_node: int = 8,
    seed: int = 0,
    start_time: float = DEFAULT_START_TIME,
    models: Sequence[str] = ("H100", "A100", "L4"),
) -> SimulatedFleet:
    """A mixed fleet: node i has ``gpus_per_node`` GPUs of ``models[i % len(models)]``.

    Node flavours rotate so that, at 4 x 8, the fleet holds 3 stuck jobs (one a Slurm job),
    3 training jobs (a 4-GPU Slurm job, 2- and 4-GPU pods), 6 inference pods, 5 notebooks,
    3 data-loader-bound jobs (one, a Slurm job, ends 4 h after the start) and 5 free GPUs.
    """
    if nodes < 1 or gpus_per_node < 1 or not models:
        raise ValueError("build_fleet: need at least one node, one GPU per node and one model")
    built = []
    for i in range(nodes):
        name = f"gpu-node-{i:02d}"
        built.append(
            SimulatedNode.build(
                name,
                [models[i % len(models)]] * gpus_per_node,
                seed=seed,
                start_time=start_time,
                flavour=i,
            )
        )
    return SimulatedFleet(built)


def build_pathology_fleet(
    seed: int = 0,
    start_time: float = DEFAULT_START_TIME,
    models: Sequence[str] = ("H100", "H100", "A100", "H100", "H100"),
) -> SimulatedFleet:
    """A fleet of 8-GPU nodes whose jobs show every bottleneck of issue 24 (input-bound,
    host-CPU-bound, communication-bound, memory-bandwidth-bound, throttled, straggler,
    faulted GPU, no tensor-core use) beside healthy training; each job's true cause is
    ``truth.true_cause``. Node i takes ``models[i]`` and plan.PATHOLOGY_FLAVOURS[i]."""
    return SimulatedFleet(
        [
            SimulatedNode.build(
                f"gpu-patho-{i:02d}",
                [model] * 8,
                seed=seed,
                start_time=start_time,
                flavour=i,
                flavours=PATHOLOGY_FLAVOURS,
            )
            for i, model in enumerate(models)
        ]
    )
