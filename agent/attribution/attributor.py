"""Which workload holds each GPU, and which workload each GPU process belongs to.

Methods, in order of precedence (the first that finds anything for a GPU names its
holders; within it every holder of a shared GPU is listed once, by ``Workload.key``):

1. kubelet pod-resources ``List`` (who holds the GPU, busy or idle);
2. the pods of the GPU's processes, from ``/proc/PID/cgroup``;
3. the Slurm jobs of the GPU's processes, from the cgroup path or ``/proc/PID/environ``;
   then the jobs whose processes (on other GPUs of the node) list this GPU in their
   environment (``SLURM_JOB_GPUS``, ``SLURM_STEP_GPUS``, ``CUDA_VISIBLE_DEVICES`` UUIDs);
4. job prolog mapping files (jobstats ``/run/gpustat``, dcgm-exporter hpc-job-mapping)
   and Slurm's own allocations (``squeue --json``: the GPU indices of this node's jobs);
5. manual labels from ``attribution.manual`` (GPU UUID, MIG parent UUID, or index);
6. bare processes (no pod, no job): someone holds the GPU, even if we cannot say who.

Each process gets its own workload: its pod (joined to pod-resources' names through the
HOSTNAME the kubelet sets), else its Slurm job, else itself. A Slurm job's account,
partition, QOS, user, name, time limit and GPU count come from its environment and, for
what that misses, from squeue. pod-resources, mapping files and squeue are cached for
``refresh_seconds``; /proc answers per PID likewise.
"""

from __future__ import annotations

import logging
import pwd
import shutil
import socket
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import msgspec

from agent.attribution.cgroups import slurm_job_from_environ
from agent.attribution.devices import GpuDirectory
from agent.attribution.hpc import JobAllocation, MappingFiles
from agent.attribution.kubelet import (
    PodDevice,
    PodResourcesCache,
    PodResourcesClient,
    shared_devices,
)
from agent.attribution.proc import ProcessIdentity, ProcReader
from agent.attribution.sharing import MPS_SERVER_PROCESS
from agent.attribution.slurm import SlurmJob, SqueueReader, SqueueSettings
from agent.attribution.workloads import (
    bare_process_workload,
    first_tier,
    job_workload,
    manual_workload,
    pod_workload,
    process_workload,
    squeue_allocations,
    visible_job_workloads,
)
from agent.config import AttributionSettings
from agent.model import GpuInfo, GpuSample, Workload, WorkloadKind
from agent.stats import AgentStats

log = logging.getLogger(__name__)

_T = TypeVar("_T")
#: where a Slurm node keeps slurm.conf: the default, and configless slurmd's caches
_SLURM_CONFS = (
    Path("/etc/slurm/slurm.conf"),
    Path("/run/slurm/conf/slurm.conf"),
    Path("/var/spool/slurmd/conf-cache/slurm.conf"),
)
#: (pid, name, what /proc said) of each process a source did not attribute itself
_Identities = tuple[tuple[int, str | None, ProcessIdentity | None], ...]


@dataclass(frozen=True, eq=False)
class _Holders:
    """What the node-wide methods found, kept while their answers stay the same.

    Equality is identity: a GPU's cached workloads (``_GpuCache``) hold only while this
    very object is current, and a new one is built whenever an answer changes.
    """

    directory: GpuDirectory
    pods: list[PodDevice]
    pods_by_gpu: dict[str, list[PodDevice]]
    jobs_by_gpu: dict[str, list[JobAllocation]]
    #: this node's jobs as squeue describes them, by job id
    slurm_jobs: Mapping[str, SlurmJob]
    #: the jobs that GPU processes' environments say hold each GPU: (device id, job)
    visible_by_gpu: dict[str, list[tuple[str, Workload]]]


class Attributor:
    """Fills ``GpuSample.workloads`` and ``ProcessSample.workload``. Use from one thread."""

    def __init__(
        self,
        settings: AttributionSettings,
        stats: AgentStats | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        procs: ProcReader | None = None,
    ) -> None:
        """``procs``: a /proc reader to share (with the host reader); else one of its own."""
        self._settings = settings
        self._stats = stats
        self._monotonic = monotonic
        client = PodResourcesClient(settings.kubelet_socket)
        self._pods = PodResourcesCache(client, settings.refresh_seconds, monotonic, stats)
        self._mapping = MappingFiles(settings.gpustat_dir, settings.hpc_job_mapping_dir)
        self._jobs: list[JobAllocation] = []
        self._jobs_read_at: float | None = None
        self._procs = procs or ProcReader(settings.proc_root, settings.refresh_seconds, monotonic)
        self._squeue = squeue_reader(settings, monotonic)
        self._user_names: dict[int, str] = {}
        self._holders_cache: _Holders | None = None
        #: the answers (GPUs, pod-resources, mapping files) behind ``_holders_cache``
        self._holders_from: tuple[object, ...] = ()
        #: per GPU: (holders, (pid, identity) per process) -> its processes' and its workloads
        self._by_gpu: dict[str, _GpuCache] = {}

    def annotate(self, gpus: Sequence[GpuInfo], samples: Sequence[GpuSample]) -> list[GpuSample]:
        """New samples with workloads filled; samples that already carry workloads pass as-is."""
        if all(sample.workloads for sample in samples):
            return list(samples)
        slurm = self._slurm_jobs(samples)
        holders = self._holders(gpus, slurm, self._visible_jobs(samples, slurm))
        by_gpu, self._by_gpu = self._by_gpu, {}
        annotated = [
            sample if sample.workloads else self._annotate(sample, holders, by_gpu)
            for sample in samples
        ]
        self._procs.forget_except(p.pid for sample in samples for p in sample.processes)
        return annotated

    def close(self) -> None:
        self._pods.close()

    def _slurm_jobs(self, samples: Sequence[GpuSample]) -> Mapping[str, SlurmJob]:
        """squeue's answer, asked again early for a job id of a GPU process it lacks."""
        if self._squeue is None:
            return {}
        wanted = []
        for sample in samples:
            for p in sample.processes:
                identity = self._procs.identity(p.pid) if p.workload is None else None
                if identity is not None:
                    job = identity.cgroup.slurm_job_id or slurm_job_from_environ(identity.environ)
                    if job is not None:
                        wanted.append(job)
        errors_before = self._squeue.errors_total
        jobs = self._squeue.jobs(wanted)
        if self._stats is not None and self._squeue.errors_total > errors_before:
            self._stats.record_field_error("", "attribution_squeue")
        return jobs

    def _visible_jobs(
        self, samples: Sequence[GpuSample], slurm_jobs: Mapping[str, SlurmJob]
    ) -> list[tuple[str, Workload]]:
        """The GPUs Slurm jobs' processes list in their environment (cached per PID)."""
        identities = (
            identity
            for sample in samples
            for p in sample.processes
            if p.workload is None and (identity := self._procs.identity(p.pid)) is not None
        )
        return visible_job_workloads(identities, self._user_name, slurm_jobs)

    def _holders(
        self,
        gpus: Sequence[GpuInfo],
        slurm_jobs: Mapping[str, SlurmJob],
        visible: list[tuple[str, Workload]],
    ) -> _Holders:
        """The node-wide answers, rebuilt only when what is behind them changed (a
        rediscovery, a pod-resources, mapping-file or squeue refresh with a different
        answer, a job's GPU processes listing other GPUs)."""
        sources = (gpus, self._pods.devices(), self._job_allocations(), slurm_jobs, visible)
        cached, cached_from = self._holders_cache, self._holders_from
        self._holders_from = sources
        if cached is not None and all(
            a is b or a == b for a, b in zip(cached_from, sources, strict=True)
        ):
            return cached  # a refresh that found the same holders changes nothing
        gpus, pods, jobs, slurm, visible = sources
        jobs = [*jobs, *squeue_allocations(slurm)]
        directory = GpuDirectory(gpus)
        self._holders_cache = _Holders(
            directory=directory,
            pods=pods,
            pods_by_gpu=_group(pods, lambda d: directory.resolve_id(d.device_id)),
            jobs_by_gpu=_group(jobs, lambda a: directory.resolve_id(a.device)),
            slurm_jobs=slurm,
            visible_by_gpu=_group(visible, lambda pair: directory.resolve_id(pair[0])),
        )
        return self._holders_cache

    def _job_allocations(self) -> list[JobAllocation]:
        now = self._monotonic()
        if self._jobs_read_at is None or now - self._jobs_read_at >= self._settings.refresh_seconds:
            self._jobs = self._mapping.read()
            self._jobs_read_at = now
        return self._jobs

    def _annotate(
        self, sample: GpuSample, holders: _Holders, previous: dict[str, _GpuCache]
    ) -> GpuSample:
        """The sample with its holders; the workloads are worked out again only when the
        node-wide answers or the GPU's processes (PIDs and what /proc said) changed."""
        identities = tuple(
            (p.pid, p.name, self._identity(p.pid, sample.gpu_uuid))
            for p in sample.processes
            if p.workload is None
        )
        cached = previous.get(sample.gpu_uuid)
        if cached is None or cached.holders is not holders or cached.identities != identities:
            cached = self._attribute_gpu(sample.gpu_uuid, holders, identities)
        self._by_gpu[sample.gpu_uuid] = cached
        if not sample.processes and sample.workloads == cached.workloads:
            return sample  # nothing to fill in: no copy
        found = iter(cached.by_process)
        processes = tuple(
            p if p.workload is not None else msgspec.structs.replace(p, workload=next(found))
            for p in sample.processes
        )
        return msgspec.structs.replace(sample, processes=processes, workloads=cached.workloads)

    def _attribute_gpu(
        self,
        gpu_uuid: str,
        holders: _Holders,
        identities: _Identities,
    ) -> _GpuCache:
        mps = any(name == MPS_SERVER_PROCESS for _, name, _ in identities)
        on_gpu = shared_devices(holders.pods_by_gpu.get(gpu_uuid, []), mps)
        by_process = tuple(
            self._process_workload(pid, name, identity, on_gpu, holders)
            for pid, name, identity in identities
        )
        # a process's cgroup may reveal the UID of a pod that pod-resources names
        uids = {w.key: w.id for w in by_process if w.kind is WorkloadKind.KUBERNETES_POD and w.name}
        tiers: list[Iterable[Workload]] = [
            (_pod(device, uids) for device in on_gpu),
            (w for w in by_process if w.kind is WorkloadKind.KUBERNETES_POD),
            (w for w in by_process if w.kind is WorkloadKind.SLURM_JOB),
            (w for _, w in holders.visible_by_gpu.get(gpu_uuid, [])),
            (
                job_workload(a, self._user_name, holders.slurm_jobs.get(a.job_id))
                for a in holders.jobs_by_gpu.get(gpu_uuid, [])
            ),
            self._manual(gpu_uuid, holders.directory),
            (w for w in by_process if w.kind is WorkloadKind.PROCESS),
        ]
        return _GpuCache(holders, identities, by_process, first_tier(tiers))

    def _identity(self, pid: int, gpu_uuid: str) -> ProcessIdentity | None:
        errors_before = self._procs.errors_total
        identity = self._procs.identity(pid)
        if self._stats is not None and self._procs.errors_total > errors_before:
            self._stats.record_field_error(gpu_uuid, "attribution_proc")
        return identity

    def _process_workload(
        self,
        pid: int,
        name: str | None,
        identity: ProcessIdentity | None,
        on_gpu: list[PodDevice],
        holders: _Holders,
    ) -> Workload:
        if identity is None:
            return bare_process_workload(pid, name)
        return process_workload(identity, on_gpu, holders.pods, self._user_name, holders.slurm_jobs)

    def _manual(self, gpu_uuid: str, directory: GpuDirectory) -> list[Workload]:
        """A label set on the GPU's UUID, else on its MIG parent's UUID, else on its index."""
        manual = self._settings.manual
        info = directory.info(gpu_uuid)
        index = directory.physical_index(gpu_uuid)
        keys = [
            gpu_uuid,
            info.mig_parent_uuid if info else None,
            str(index) if index is not None else None,
        ]
        for key in keys:
            if key is not None and key in manual:
                return [manual_workload(key, manual[key])]
        return []

    def _user_name(self, uid: int) -> str:
        """The account name for ``uid`` (cached, misses too: NSS may be slow), else the uid."""
        name = self._user_names.get(uid)
        if name is None:
            try:
                name = pwd.getpwuid(uid).pw_name
            except KeyError:
                name = str(uid)
            self._user_names[uid] = name
        return name


@dataclass(frozen=True, eq=False)
class _GpuCache:
    """One GPU's attribution and what it was worked out from."""

    holders: _Holders
    identities: _Identities
    #: one per process without a workload, in the sample's order
    by_process: tuple[Workload, ...]
    workloads: tuple[Workload, ...]


def _pod(device: PodDevice, uids: dict[str, str]) -> Workload:
    workload = pod_workload(device)
    uid = uids.get(workload.key)
    return pod_workload(device, uid) if uid else workload


def squeue_reader(
    settings: AttributionSettings, monotonic: Callable[[], float]
) -> SqueueReader | None:
    """The squeue this node has; None: Slurm is not asked.

    "auto" asks the squeue on PATH where the node has a Slurm configuration (``slurm_conf``,
    /etc/slurm or a configless slurmd's cache): a client without one cannot reach Slurm.
    """
    path = settings.squeue_path
    if path == "auto":
        configured = settings.slurm_conf is not None or any(p.exists() for p in _SLURM_CONFS)
        path = (shutil.which("squeue") or "") if configured else ""
    if not path:
        return None
    node = settings.slurm_node or socket.gethostname().split(".")[0]
    reader_settings = SqueueSettings(
        argv=(path, "--json"),
        node=node,
        refresh_seconds=settings.refresh_seconds,
        timeout_seconds=settings.squeue_timeout_seconds,
        slurm_conf=settings.slurm_conf,
    )
    return SqueueReader(reader_settings, monotonic)


def _group(items: Iterable[_T], gpu_of: Callable[[_T], str | None]) -> dict[str, list[_T]]:
    groups: dict[str, list[_T]] = defaultdict(list)
    for item in items:
        uuid = gpu_of(item)
        if uuid is not None:
            groups[uuid].append(item)
    return dict(groups)
