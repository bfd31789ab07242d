"""Per-workload host CPU and memory from cgroups: the agent's ``HostReader`` on real nodes.

For each workload holding a GPU in a tick's samples, its cgroup is found from the GPU
processes' /proc/PID/cgroup (agent/attribution/proc.py, the Attributor's cached reader):
a pod's is the pod's own cgroup above its containers, a Slurm job's is its ``job_N``
cgroup above the steps, a bare process's is its own. A pod or job without a process on
its GPUs is looked for where the kubelet (systemd or cgroupfs driver) and slurmstepd put
them. In a pod with a private cgroup namespace, paths come relative to it (``/../..``);
the leading ``..`` are dropped and the rest tried from the host's root, then the
pod-UID layouts.

Each cgroup is read once per tick whatever the number of its workloads' GPUs; counters
are kept only for the cgroups read in the last tick, so a vanished cgroup (a job that
ended) forgets its counters. A workload whose cgroup cannot be found gives no host sample:
logged once per kind of workload, counted in ``gpufleet_agent_field_errors_total``
(field ``host_cgroup``). Manual labels name no cgroup and are skipped.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent.attribution.cgroup_files import CgroupDirs, CgroupFiles
from agent.attribution.cgroup_usage import CgroupReading, host_sample
from agent.attribution.cgroups import pod_cgroup, slurm_job_cgroup
from agent.attribution.proc import ProcReader
from agent.model import GpuSample, Workload, WorkloadHostSample, WorkloadKind
from agent.stats import AgentStats

log = logging.getLogger(__name__)

_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: where the kubelet puts a pod's cgroup by QoS class: systemd driver, then cgroupfs
_POD_LAYOUTS = (
    "/kubepods.slice/kubepods-pod{u_}.slice",
    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u_}.slice",
    "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u_}.slice",
    "/kubepods/pod{u}",
    "/kubepods/burstable/pod{u}",
    "/kubepods/besteffort/pod{u}",
)
#: slurmstepd's cgroup/v2 plugin
_JOB_LAYOUTS = ("/system.slice/slurmstepd.scope/job_{job}",)


@dataclass
class _Holder:
    workload: Workload
    #: the first GPU it holds, for the error counter's label
    gpu_uuid: str
    #: PIDs on its GPUs that attribution gave to it
    pids: list[int] = field(default_factory=list)


class CgroupHostReader:
    """``HostReader`` (agent/sampler.py) over the cgroup filesystem at ``cgroup_root``.

    Use from the sampler's thread (the one the Attributor sharing ``procs`` runs in).
    """

    def __init__(
        self,
        procs: ProcReader,
        cgroup_root: Path = Path("/sys/fs/cgroup"),
        stats: AgentStats | None = None,
        refresh_seconds: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._procs = procs
        self._files = CgroupFiles(cgroup_root)
        self._stats = stats
        self._refresh_seconds = refresh_seconds
        self._monotonic = monotonic
        #: workload key -> (when found, where its cgroup is; None: not found)
        self._located: dict[str, tuple[float, CgroupDirs | None]] = {}
        #: the readings of the last tick, by cgroup: the previous counters of the next
        self._previous: dict[CgroupDirs, CgroupReading] = {}
        self._warned: set[WorkloadKind] = set()

    def read_hosts(self, samples: Sequence[GpuSample], now: float) -> list[WorkloadHostSample]:
        """One host sample per workload holding a GPU in ``samples`` whose cgroup is found."""
        holders = _holders(samples)
        at = self._monotonic()
        readings: dict[CgroupDirs, CgroupReading | None] = {}
        out = []
        for key, holder in holders.items():
            dirs = self._locate(holder, at)
            if dirs is None:
                continue
            if dirs not in readings:
                readings[dirs] = self._read(dirs, at)
            reading = readings[dirs]
            if reading is None:  # gone since it was found: look again next tick
                self._located.pop(key, None)
                continue
            out.append(host_sample(key, now, self._previous.get(dirs), reading))
        self._previous = {d: r for d, r in readings.items() if r is not None}
        for key in self._located.keys() - holders.keys():
            del self._located[key]
        return out

    def _read(self, dirs: CgroupDirs, at: float) -> CgroupReading | None:
        errors_before = self._files.errors_total
        reading = self._files.read(dirs, at)
        if self._stats is not None and self._files.errors_total > errors_before:
            self._stats.record_field_error("", "host_cgroup_read")
        return reading

    def _locate(self, holder: _Holder, at: float) -> CgroupDirs | None:
        """Where the holder's cgroup is; a miss is asked again after ``refresh_seconds``."""
        key = holder.workload.key
        cached = self._located.get(key)
        if cached is not None and (cached[1] is not None or at - cached[0] < self._refresh_seconds):
            return cached[1]
        if holder.workload.kind is WorkloadKind.MANUAL:
            return None
        dirs = next(
            (d for paths in self._candidates(holder) if (d := self._files.dirs(paths))), None
        )
        self._located[key] = (at, dirs)
        if dirs is None:
            self._not_found(holder)
        return dirs

    def _candidates(self, holder: _Holder) -> Iterator[dict[str, str]]:
        """controller -> cgroup path ("": v2), from its processes first, then by id."""
        workload = holder.workload
        for pid in holder.pids:
            identity = self._procs.identity(pid)
            if identity is None:
                continue
            paths: dict[str, str] = {}
            for controllers, path in identity.cgroup_paths:
                own = _workload_path(workload.kind, _host_relative(path))
                if own is None:
                    continue
                for controller in controllers.split(","):
                    paths.setdefault(controller, own)
            if paths:
                yield paths
        yield from ({"": path} for path in _layouts(workload))

    def _not_found(self, holder: _Holder) -> None:
        if self._stats is not None:
            self._stats.record_field_error(holder.gpu_uuid, "host_cgroup")
        kind = holder.workload.kind
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning(
                "cannot find the cgroup of %s (no readable /proc/PID/cgroup for its GPU "
                "processes, nor a known layout under the cgroup root); no host CPU or memory "
                "for it. Mount the host's /sys/fs/cgroup and set attribution.cgroup_root "
                "(logged once per kind of workload)",
                holder.workload.key,
            )


def _holders(samples: Sequence[GpuSample]) -> dict[str, _Holder]:
    """Each workload holding a GPU in ``samples``, with the PIDs given to it."""
    holders: dict[str, _Holder] = {}
    for sample in samples:
        keys = set()
        for workload in sample.workloads:
            holders.setdefault(workload.key, _Holder(workload, sample.gpu_uuid))
            keys.add(workload.key)
        for process in sample.processes:
            own = process.workload
            if own is None:
                continue
            for key in keys:
                holder = holders[key].workload
                if own.key == key or (own.kind, own.id) == (holder.kind, holder.id):
                    holders[key].pids.append(process.pid)
    return holders


def _host_relative(path: str) -> str:
    """``path`` without the leading ``/..`` a private cgroup namespace shows."""
    while path.startswith("/.."):
        path = path[3:]
    return path or "/"


def _workload_path(kind: WorkloadKind, path: str) -> str | None:
    if kind is WorkloadKind.KUBERNETES_POD:
        return pod_cgroup(path)
    if kind is WorkloadKind.SLURM_JOB:
        return slurm_job_cgroup(path)
    return path


def _layouts(workload: Workload) -> list[str]:
    if workload.kind is WorkloadKind.KUBERNETES_POD and _UID.fullmatch(workload.id):
        uid = workload.id
        return [p.format(u=uid, u_=uid.replace("-", "_")) for p in _POD_LAYOUTS]
    if workload.kind is WorkloadKind.SLURM_JOB:
        return [p.format(job=workload.slurm_job_id or workload.id) for p in _JOB_LAYOUTS]
    return []
