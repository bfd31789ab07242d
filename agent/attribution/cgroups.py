"""Who a process belongs to, from the text of /proc/PID/cgroup, /proc/PID/environ and status.

Pure parsing: no file access here (see ``agent.attribution.proc``). The patterns are
unanchored on purpose: inside a private cgroup namespace another process's path is
relative to ours and may start with ``/../..`` (cgroup_namespaces(7)), so we search for
the pod UID, the 64-hex container id and the Slurm job anywhere in the path and take
the deepest match (a kind node nests the pod's cgroup under a Docker container's).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

# the systemd cgroup driver escapes "-" in the pod UID as "_"
_POD_UID = re.compile(
    r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})"
)
_CONTAINER_ID = re.compile(
    r"(?:(cri-containerd|crio|docker|libpod)[-:])?(?<![0-9a-f])([0-9a-f]{64})(?![0-9a-f])"
)
_RUNTIMES = {
    "cri-containerd": "containerd",
    "crio": "cri-o",
    "docker": "docker",
    "libpod": "podman",
}
# cgroup v1: /slurm/uid_1000/job_42/step_0/task_0
# cgroup v2: /system.slice/slurmstepd.scope/job_42/step_batch/user/task_0
_SLURM_JOB = re.compile(r"(?:^|/)job_([0-9]+)(?:/step_([^/]+))?(?=/|$)")
_SLURM_UID = re.compile(r"(?:^|/)uid_([0-9]+)/job_")

#: the only environment variables we keep; the rest of a process's environment may hold secrets
ENVIRON_KEYS = frozenset(
    {
        "SLURM_JOB_ID",
        "SLURM_JOBID",
        "SLURM_STEP_ID",
        "SLURM_JOB_USER",
        "SLURM_JOB_UID",
        "SLURM_JOB_NAME",
        "SLURM_JOB_ACCOUNT",
        "SLURM_JOB_PARTITION",
        # the GPUs the job holds on this node, also those no process of it uses
        "SLURM_JOB_GPUS",
        "SLURM_STEP_GPUS",
        "CUDA_VISIBLE_DEVICES",
        # set by the kubelet to the pod name; joins a cgroup pod UID to pod-resources' names
        "HOSTNAME",
    }
)


@dataclass(frozen=True)
class CgroupIdentity:
    """What a cgroup path says about a process; ``None`` where it says nothing."""

    pod_uid: str | None = None
    #: ``<runtime>://<64 hex>`` as in a pod's containerStatuses, or the bare id
    container_id: str | None = None
    slurm_job_id: str | None = None
    slurm_step: str | None = None
    slurm_uid: int | None = None

    @property
    def empty(self) -> bool:
        return self.pod_uid is None and self.container_id is None and self.slurm_job_id is None


def cgroup_paths(text: str) -> list[str]:
    """The paths in a /proc/PID/cgroup file, the cgroup v2 (``0::``) one first.

    v1 lines are ``id:controllers:path``; the path may itself contain ``:`` (an old
    containerd layout writes ``...slice:cri-containerd:<id>``), so split twice only.
    """
    unified: list[str] = []
    others: list[str] = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        (unified if parts[0] == "0" and parts[1] == "" else others).append(parts[2])
    return unified + others


def cgroup_lines(text: str) -> tuple[tuple[str, str], ...]:
    """(controllers, path) per line of a /proc/PID/cgroup file; ``""`` controllers for v2."""
    lines = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            lines.append((parts[1], parts[2]))
    return tuple(lines)


def pod_cgroup(path: str) -> str | None:
    """The pod's own cgroup above a container's: ``path`` cut after its (deepest) pod
    component, e.g. ``.../kubepods-burstable-pod<uid>.slice``; None outside a pod."""
    found = list(_POD_UID.finditer(path))
    if not found:
        return None
    end = path.find("/", found[-1].end())
    return path if end < 0 else path[:end]


def slurm_job_cgroup(path: str) -> str | None:
    """A Slurm job's cgroup above its steps and tasks: ``path`` cut after ``job_N``."""
    job, _ = _slurm_job(path)
    if job is None:
        return None
    return path[: list(_SLURM_JOB.finditer(path))[-1].end(1)]


def parse_cgroup_path(path: str) -> CgroupIdentity:
    """Pod UID, container id and Slurm job named anywhere in one cgroup path."""
    pods = _POD_UID.findall(path)
    containers = list(_CONTAINER_ID.finditer(path))
    container_id = None
    if containers:
        runtime, token = containers[-1].group(1), containers[-1].group(2)
        container_id = f"{_RUNTIMES[runtime]}://{token}" if runtime else token
    job, step = _slurm_job(path)
    uid = _SLURM_UID.search(path) if job else None
    return CgroupIdentity(
        pod_uid=pods[-1].replace("_", "-") if pods else None,
        container_id=container_id,
        slurm_job_id=job,
        slurm_step=step,
        slurm_uid=int(uid.group(1)) if uid else None,
    )


def _slurm_job(path: str) -> tuple[str | None, str | None]:
    matches = list(_SLURM_JOB.finditer(path))
    if not matches:
        return None, None
    last = matches[-1]
    # a bare "job_N" directory is Slurm's only inside a slurm hierarchy or above a step
    if "slurm" not in path and last.group(2) is None:
        return None, None
    return last.group(1), last.group(2)


def parse_cgroup_file(text: str) -> CgroupIdentity:
    """The first cgroup path (v2 first, then v1 hierarchies) that names a pod or a job."""
    fallback = CgroupIdentity()
    for path in cgroup_paths(text):
        identity = parse_cgroup_path(path)
        if identity.pod_uid or identity.slurm_job_id:
            return identity
        if fallback.empty:
            fallback = identity
    return fallback


def parse_environ(data: bytes, keys: frozenset[str] = ENVIRON_KEYS) -> dict[str, str]:
    """The allow-listed variables of a NUL-separated /proc/PID/environ."""
    result: dict[str, str] = {}
    for entry in data.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if not sep:
            continue
        key = name.decode("ascii", errors="replace")
        if key in keys:
            result[key] = value.decode("utf-8", errors="replace")
    return result


def parse_status_uid(text: str) -> int | None:
    """The real UID from /proc/PID/status (``Uid:\\treal\\teffective\\tsaved\\tfs``)."""
    for line in text.splitlines():
        if line.startswith("Uid:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1])
            return None
    return None


def slurm_job_from_environ(environ: Mapping[str, str]) -> str | None:
    """SLURM_JOB_ID (or the older SLURM_JOBID) when it is a job number."""
    job = environ.get("SLURM_JOB_ID") or environ.get("SLURM_JOBID")
    return job if job and job.isdigit() else None


def visible_gpus(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The GPUs a Slurm job's process says its job holds on this node, as device ids
    (``"0"``, ``"GPU-<uuid>"``): SLURM_JOB_GPUS, else SLURM_STEP_GPUS (Slurm's node-level
    indexes), else CUDA_VISIBLE_DEVICES where it names UUIDs. Its numbers are left out:
    under ``ConstrainDevices`` Slurm renumbers them from 0 inside the job, so "0" may be
    the node's GPU 3. () when none is set (or ``NoDevFiles``)."""
    for key in ("SLURM_JOB_GPUS", "SLURM_STEP_GPUS"):
        found = _device_list(environ.get(key, ""))
        if found:
            return found
    named = _device_list(environ.get("CUDA_VISIBLE_DEVICES", ""))
    return named if all(d.startswith(("GPU-", "MIG-")) for d in named) else ()


def _device_list(value: str) -> tuple[str, ...]:
    devices = tuple(d.strip() for d in value.split(",") if d.strip())
    return () if devices == ("NoDevFiles",) else devices
