"""Placing simulated workloads on a node's GPUs: who runs what, named like a real cluster.

Four node flavours rotate across a fleet so that every workload kind appears. Everything
is drawn from (seed, node name), never from the wall clock or ``hash``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from agent.model import GpuInfo, Workload, WorkloadKind
from agent.sources.simulated.gpu import SimulatedGpu
from agent.sources.simulated.hardware import GpuModel, board_gain
from agent.sources.simulated.workloads import (
    SEGMENT_SECONDS,
    ActivityKind,
    SimJob,
    make_pattern,
    stable_key,
    unit,
)

DRIVER_VERSION = "550.54.15"
CUDA_VERSION = "12.4"
_TEAMS = ("vision", "nlp", "search", "speech", "platform")
_USERS = ("alice", "bo", "chen", "dana", "emeka", "farah")


@dataclass(frozen=True)
class Slot:
    """One job in a node flavour: its kind, GPU count, scheduler and optional end."""

    kind: ActivityKind
    gpus: int = 1
    slurm: bool = False
    #: the job ends this long after the epoch (the GPU is free afterwards); None = never
    ends_after_seconds: float | None = None


_T, _I, _N, _S, _D = (
    ActivityKind.TRAINING,
    ActivityKind.INFERENCE,
    ActivityKind.NOTEBOOK,
    ActivityKind.STUCK,
    ActivityKind.DATALOADER_BOUND,
)
_CPU, _COMM, _MEM, _HOT, _LAG, _FAULT, _FP32 = (
    ActivityKind.HOST_CPU_BOUND,
    ActivityKind.COMM_BOUND,
    ActivityKind.MEMORY_BOUND,
    ActivityKind.THROTTLED,
    ActivityKind.STRAGGLER,
    ActivityKind.FAULTED,
    ActivityKind.NO_TENSOR,
)

#: GPUs beyond a flavour's slots are free (no workload, bare idle)
FLAVOURS: tuple[tuple[Slot, ...], ...] = (
    (Slot(_T, 4, slurm=True), Slot(_S, slurm=True), Slot(_N)),
    (Slot(_I), Slot(_I), Slot(_T, 2), Slot(_D), Slot(_S), Slot(_N)),
    (Slot(_I), Slot(_I), Slot(_I), Slot(_I), Slot(_N), Slot(_N), Slot(_S)),
    (Slot(_T, 4), Slot(_D, slurm=True, ends_after_seconds=4 * 3600.0), Slot(_D), Slot(_N)),
)

#: nodes of ``build_pathology_fleet``: every bottleneck of issue 24 beside healthy training
PATHOLOGY_FLAVOURS: tuple[tuple[Slot, ...], ...] = (
    (Slot(_D), Slot(_CPU), Slot(_COMM, 4), Slot(_T, 2)),
    (Slot(_LAG, 4), Slot(_HOT, 2), Slot(_FP32), Slot(_FAULT)),
    (Slot(_MEM), Slot(_T, 4), Slot(_D, slurm=True), Slot(_CPU), Slot(_FAULT)),
    (Slot(_T, 4, slurm=True), Slot(_HOT), Slot(_MEM), Slot(_FP32, 2)),
    (Slot(_COMM, 2), Slot(_LAG, 3, slurm=True), Slot(_FAULT), Slot(_T, 2)),
)

_NAMES = {
    _T: ("ml-training", "llm-pretrain", "trainer", "python"),
    _I: ("serving", "diffusion-serve", "server", "tritonserver"),
    _N: ("notebooks", "jupyter", "notebook", "ipykernel_launcher"),
    _S: ("research", "sweep-worker", "worker", "python"),
    _D: ("ml-training", "finetune-etl", "trainer", "python"),
    _CPU: ("ml-training", "augment-heavy", "trainer", "python"),
    _COMM: ("ml-training", "llm-sharded", "trainer", "torchrun"),
    _MEM: ("research", "sparse-attn", "worker", "python"),
    _HOT: ("ml-training", "vit-large", "trainer", "python"),
    _LAG: ("ml-training", "ddp-resnet", "trainer", "torchrun"),
    _FAULT: ("research", "sweep-worker", "worker", "python"),
    _FP32: ("research", "fp32-baseline", "worker", "python"),
}


def deterministic_uuid(*parts: object) -> str:
    """A version-4-shaped UUID string derived from ``parts``."""
    raw = stable_key(*parts, "a").to_bytes(8, "big") + stable_key(*parts, "b").to_bytes(8, "big")
    return str(uuid.UUID(bytes=raw, version=4))


def make_workload(kind: ActivityKind, slurm: bool, seed: int, node: str, slot: int) -> Workload:
    """A Kubernetes pod or Slurm job identity for a job of ``kind``."""
    key = stable_key(seed, node, slot, "workload")
    namespace, base, container, _ = _NAMES[kind]
    team = _TEAMS[int(unit(key, 1) * len(_TEAMS))]
    suffix = f"{key % 0xFFFFF:05x}"
    if slurm:
        job_id = str(100_000 + key % 900_000)
        user = _USERS[int(unit(key, 2) * len(_USERS))]
        return Workload(
            kind=WorkloadKind.SLURM_JOB,
            id=job_id,
            slurm_job_id=job_id,
            name=f"{base}-{suffix}",
            user=user,
            team=team,
            labels={"team": team},
        )
    user = _USERS[int(unit(key, 2) * len(_USERS))]
    return Workload(
        kind=WorkloadKind.KUBERNETES_POD,
        id=deterministic_uuid(key, "pod"),
        name=f"{base}-{suffix}",
        namespace=namespace,
        container=container,
        team=team,
        labels={"team": team, **pod_owner_labels(kind, base, team, user, key)},
    )


def pod_owner_labels(
    kind: ActivityKind, base: str, team: str, user: str, key: int
) -> dict[str, str]:
    """What the pod of a job of ``kind`` would carry: its owners, named as OpenTelemetry's
    k8s resource attributes (collector/kube/owners.py reads them), and its user, the way
    the controller that makes such pods names them: serving is a Deployment, training a
    Kubeflow PyTorchJob, a notebook a Kubeflow Notebook (through its StatefulSet), a sweep
    a CronJob's Job, an ETL job a plain Job. One owner per (job, team), a notebook per
    (user, team)."""
    owner = f"{base}-{team}"
    if kind is ActivityKind.INFERENCE:
        rs = f"{owner}-{stable_key(owner) % 0xFFFFFFF:07x}"  # one pod template per owner
        labels = {"k8s_replicaset_name": rs, "k8s_deployment_name": owner}
    elif kind is ActivityKind.TRAINING:
        labels = {"k8s_owner_kind": "PyTorchJob", "k8s_owner_name": owner}
    elif kind is ActivityKind.NOTEBOOK:
        notebook = f"{user}-{team}"
        labels = {"k8s_statefulset_name": notebook, "k8s_owner_kind": "Notebook",
                  "k8s_owner_name": notebook, "notebooks.kubeflow.org/creator": user}  # fmt: skip
        return labels
    elif kind is ActivityKind.STUCK:
        labels = {"k8s_job_name": f"{owner}-{29_000_000 + key % 1_000_000}",
                  "k8s_cronjob_name": owner}  # fmt: skip
    else:
        labels = {"k8s_job_name": owner}
    return {**labels, "gpufleet.io/owner": user}


def plan_jobs(
    node: str,
    gpu_count: int,
    flavour: int,
    seed: int,
    epoch: float,
    flavours: Sequence[tuple[Slot, ...]] = FLAVOURS,
) -> list[SimJob]:
    """The jobs of one node of ``flavour``, filling GPU indexes in order until none is left."""
    jobs: list[SimJob] = []
    next_index = 0
    for number, slot in enumerate(flavours[flavour % len(flavours)]):
        count = min(slot.gpus, gpu_count - next_index)
        if count <= 0:
            break
        end = None
        if slot.ends_after_seconds is not None:
            end = epoch + round(slot.ends_after_seconds / SEGMENT_SECONDS) * SEGMENT_SECONDS
        jobs.append(
            SimJob(
                workload=make_workload(slot.kind, slot.slurm, seed, node, number),
                pattern=make_pattern(slot.kind, stable_key(seed, node, number, "pattern")),
                node=node,
                gpu_indexes=tuple(range(next_index, next_index + count)),
                end_time=end,
                process_name=_NAMES[slot.kind][3],
            )
        )
        next_index += count
    return jobs


def board_info(
    node: str, index: int, model: GpuModel, seed: int, mig_enabled: bool = False
) -> GpuInfo:
    """The identity of a node's physical GPU ``index`` of ``model``, as NVML gives it."""
    return GpuInfo(
        uuid="GPU-" + deterministic_uuid(seed, node, index, "gpu"),
        index=index,
        name=model.name,
        architecture=model.architecture,
        memory_total_bytes=model.memory_total_bytes,
        pci_bus_id=f"00000000:{(0x18 + index) % 256:02X}:00.0",
        driver_version=DRIVER_VERSION,
        cuda_version=CUDA_VERSION,
        power_limit_watts=model.tdp_watts,
        mig_enabled=mig_enabled,
    )


def build_gpus(
    node: str,
    models: Sequence[GpuModel],
    jobs: Sequence[SimJob],
    seed: int,
    epoch: float,
) -> list[SimulatedGpu]:
    """One SimulatedGpu per model entry (index order), each holding the jobs placed on it."""
    gpus = []
    for index, model in enumerate(models):
        info = board_info(node, index, model, seed)
        held = tuple(job for job in jobs if index in job.gpu_indexes)
        gain = board_gain(f"{seed}/{node}/{index}/gain")
        key = stable_key(seed, node, index, "noise")
        gpus.append(SimulatedGpu(info, model, gain=gain, key=key, epoch=epoch, jobs=held))
    return gpus
