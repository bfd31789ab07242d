"""Which workload labels a GPU's series, and the values of its workload labels.

A GPU held by several workloads labels its series with its *primary* one (a Kubernetes pod
first, then a Slurm job, then a manual label, then a bare process; ties broken by workload
key); the label names are ``WORKLOAD_LABELS`` (OpenTelemetry's), used by the catalogue's
GPU rows (agent/metrics/catalogue.py) and its per-workload host rows alike.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent.model import Workload, WorkloadKind, primary_rank

#: who holds a GPU (OpenTelemetry names); empty strings when nobody does
WORKLOAD_LABELS: tuple[str, ...] = (
    "k8s_namespace_name",
    "k8s_pod_name",
    "k8s_container_name",
    "slurm_job_id",
)


def sorted_workloads(workloads: Iterable[Workload]) -> list[Workload]:
    """Workloads in a stable order, primary first (pod, Slurm job, manual, process; by key)."""
    return sorted(workloads, key=lambda w: primary_rank(w.kind, w.key))


def primary_workload(workloads: Iterable[Workload]) -> Workload | None:
    """The workload whose labels a GPU's series carry; None when nobody holds the GPU."""
    ranked = sorted_workloads(workloads)
    return ranked[0] if ranked else None


def workload_label_values(workload: Workload | None) -> tuple[str, str, str, str]:
    """k8s_namespace_name, k8s_pod_name, k8s_container_name, slurm_job_id ("" = none)."""
    if workload is None:
        return ("", "", "", "")
    job = workload.slurm_job_id or ""
    if workload.kind is WorkloadKind.SLURM_JOB:
        job = job or workload.id
    if workload.kind is not WorkloadKind.KUBERNETES_POD:
        return ("", "", "", job)
    return (workload.namespace or "", workload.name or "", workload.container or "", job)
