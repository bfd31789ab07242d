"""Workload values built from what each attribution method found. Pure: no I/O.

Identifiers follow ``agent.model.Workload``: a pod's ``id`` is its UID when a process's
cgroup revealed it, else ``namespace/name``; a Slurm job's is the job id; a bare
process's is its PID; a manual label's is its name (else the GPU key it was set on).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from agent.attribution.cgroups import slurm_job_from_environ, visible_gpus
from agent.attribution.hpc import JobAllocation
from agent.attribution.kubelet import PodDevice
from agent.attribution.proc import ProcessIdentity
from agent.attribution.slurm import SlurmJob
from agent.model import (
    SLURM_ACCOUNT_LABEL,
    SLURM_GPUS_LABEL,
    SLURM_PARTITION_LABEL,
    SLURM_QOS_LABEL,
    SLURM_STEP_LABEL,
    SLURM_TIME_LIMIT_LABEL,
    Workload,
    WorkloadKind,
)

#: uid -> user name, or the uid as a string when the name is unknown
UserNames = Callable[[int], str]

_MANUAL_FIELDS = ("name", "namespace", "team", "user")


def pod_workload(device: PodDevice, uid: str | None = None) -> Workload:
    """The pod holding a device, as pod-resources names it, with how it shares the GPU."""
    return Workload(
        kind=WorkloadKind.KUBERNETES_POD,
        id=uid or f"{device.namespace}/{device.pod}",
        name=device.pod,
        namespace=device.namespace,
        container=device.container or None,
        gpu_sharing=device.sharing.mode,
        gpu_share=device.sharing.share,
    )


def find_pod(
    hostname: str | None, on_gpu: Sequence[PodDevice], on_node: Sequence[PodDevice]
) -> PodDevice | None:
    """The pod-resources entry whose pod name is the process's HOSTNAME, if unambiguous.

    The kubelet sets HOSTNAME to the pod name (unless the pod sets ``spec.hostname`` or
    uses the host network, when no pod matches and the join is simply not made). Pods on
    the process's GPU are tried first, then all pods on the node, so a pod name reused in
    two namespaces joins only where the GPU tells them apart.
    """
    if not hostname:
        return None
    for candidates in (on_gpu, on_node):
        pods = {(d.namespace, d.pod) for d in candidates if d.pod == hostname}
        if len(pods) == 1:
            namespace, name = pods.pop()
            matches = [d for d in candidates if (d.namespace, d.pod) == (namespace, name)]
            containers = {d.container for d in matches if d in on_gpu}
            container = containers.pop() if len(containers) == 1 else ""
            return PodDevice(namespace, name, container, matches[0].resource_name, "")
        if len(pods) > 1:
            return None
    return None


def process_workload(
    identity: ProcessIdentity,
    on_gpu: Sequence[PodDevice],
    on_node: Sequence[PodDevice],
    user_names: UserNames,
    slurm_jobs: Mapping[str, SlurmJob] | None = None,
) -> Workload:
    """A pod (from the cgroup), else a Slurm job (cgroup, then environ), else the process."""
    cgroup = identity.cgroup
    if cgroup.pod_uid is not None:
        labels = {"container_id": cgroup.container_id} if cgroup.container_id else {}
        pod = find_pod(identity.environ.get("HOSTNAME"), on_gpu, on_node)
        if pod is None:
            return Workload(kind=WorkloadKind.KUBERNETES_POD, id=cgroup.pod_uid, labels=labels)
        joined = pod_workload(pod, cgroup.pod_uid)
        return Workload(
            kind=joined.kind,
            id=joined.id,
            name=joined.name,
            namespace=joined.namespace,
            container=joined.container,
            labels=labels,
        )
    job = cgroup.slurm_job_id or slurm_job_from_environ(identity.environ)
    if job is not None:
        return slurm_process_workload(identity, job, user_names, (slurm_jobs or {}).get(job))
    return Workload(
        kind=WorkloadKind.PROCESS,
        id=str(identity.pid),
        name=identity.comm,
        user=user_names(identity.uid) if identity.uid is not None else None,
    )


def slurm_process_workload(
    identity: ProcessIdentity, job: str, user_names: UserNames, slurm: SlurmJob | None = None
) -> Workload:
    """From the process's cgroup and environment; what they miss, from Slurm (squeue)."""
    environ = identity.environ
    uid = identity.cgroup.slurm_uid
    if uid is None and environ.get("SLURM_JOB_UID", "").isdigit():
        uid = int(environ["SLURM_JOB_UID"])
    if uid is None:
        uid = identity.uid
    user = environ.get("SLURM_JOB_USER") or (slurm.user if slurm else None)
    if not user and uid is not None:
        user = user_names(uid)
    labels = {
        label: value
        for label, value in (
            (SLURM_STEP_LABEL, identity.cgroup.slurm_step or environ.get("SLURM_STEP_ID")),
            (SLURM_ACCOUNT_LABEL, environ.get("SLURM_JOB_ACCOUNT")),
            (SLURM_PARTITION_LABEL, environ.get("SLURM_JOB_PARTITION")),
        )
        if value
    }
    return Workload(
        kind=WorkloadKind.SLURM_JOB,
        id=job,
        name=environ.get("SLURM_JOB_NAME") or (slurm.name if slurm else None),
        slurm_job_id=job,
        user=user,
        labels={**slurm_labels(slurm), **labels},
    )


def slurm_labels(job: SlurmJob | None) -> dict[str, str]:
    """The labels Slurm gives a job: account, partition, QOS, time limit, GPUs asked."""
    if job is None:
        return {}
    limit = job.time_limit_seconds
    found = (
        (SLURM_ACCOUNT_LABEL, job.account),
        (SLURM_PARTITION_LABEL, job.partition),
        (SLURM_QOS_LABEL, job.qos),
        (SLURM_TIME_LIMIT_LABEL, f"{limit:g}" if limit is not None else None),
        (SLURM_GPUS_LABEL, str(job.gpus) if job.gpus is not None else None),
    )
    return {label: value for label, value in found if value}


def job_workload(
    allocation: JobAllocation, user_names: UserNames, slurm: SlurmJob | None = None
) -> Workload:
    """A job from a prolog mapping file or Slurm's own allocation (squeue)."""
    user = user_names(allocation.uid) if allocation.uid is not None else None
    return Workload(
        kind=WorkloadKind.SLURM_JOB,
        id=allocation.job_id,
        name=slurm.name if slurm else None,
        slurm_job_id=allocation.job_id,
        user=user or (slurm.user if slurm else None),
        labels=slurm_labels(slurm),
    )


def squeue_allocations(jobs: Mapping[str, SlurmJob]) -> list[JobAllocation]:
    """One allocation per GPU index each job holds on this node, in Slurm's words."""
    return [
        JobAllocation(str(index), job.job_id)
        for job in jobs.values()
        if job.holds_gpus
        for index in job.gpu_indexes
    ]


def bare_process_workload(pid: int, name: str | None) -> Workload:
    """A process whose /proc entry we could not read: all we know is its PID."""
    return Workload(kind=WorkloadKind.PROCESS, id=str(pid), name=name)


def manual_workload(gpu_key: str, values: Mapping[str, str]) -> Workload:
    """A label from ``attribution.manual``; keys beyond name/namespace/team/user are labels."""
    return Workload(
        kind=WorkloadKind.MANUAL,
        id=values.get("name") or gpu_key,
        name=values.get("name"),
        namespace=values.get("namespace"),
        team=values.get("team"),
        user=values.get("user"),
        labels={k: v for k, v in values.items() if k not in _MANUAL_FIELDS},
    )


def first_tier(tiers: Iterable[Iterable[Workload]]) -> tuple[Workload, ...]:
    """The workloads of the first method that found any, de-duplicated by key in order.

    Methods are not mixed: a pod named by pod-resources (``pod:ns/name``) and the same
    pod seen only by UID in a cgroup (``pod:/uid``) would otherwise count twice.
    """
    for tier in tiers:
        unique: dict[str, Workload] = {}
        for workload in tier:
            unique.setdefault(workload.key, workload)
        if unique:
            return tuple(unique.values())
    return ()


def visible_job_workloads(
    identities: Iterable[ProcessIdentity],
    user_names: UserNames,
    slurm_jobs: Mapping[str, SlurmJob] | None = None,
) -> list[tuple[str, Workload]]:
    """(device id, job) for each GPU a Slurm job's process lists in its environment
    (cgroups.visible_gpus), once per device and job: a GPU the job holds but runs nothing
    on is still the job's, even without squeue. Pods' processes are left out."""
    found: dict[tuple[str, str], Workload] = {}
    for identity in identities:
        job = identity.cgroup.slurm_job_id or slurm_job_from_environ(identity.environ)
        if job is None or identity.cgroup.pod_uid is not None:
            continue
        for device in visible_gpus(identity.environ):
            if (device, job) not in found:
                slurm = (slurm_jobs or {}).get(job)
                found[(device, job)] = slurm_process_workload(identity, job, user_names, slurm)
    return [(device, w) for (device, _), w in found.items()]
