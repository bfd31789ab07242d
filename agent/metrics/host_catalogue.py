"""Catalogue rows and readings of the per-workload host families (``gpufleet_workload_host_*``).

One series per workload holding a GPU whose cgroup the agent read (agent/attribution/
host_usage.py; the simulator's own readings with ``--source simulated``), labelled like
``gpufleet_gpu_workload_info``: ``workload_kind``, ``workload_key`` and the OpenTelemetry
workload labels. A value of ``None`` gives no series (never 0): no CPU rate on a cgroup's
first reading, no limit on an unlimited cgroup, no memory pressure on cgroup v1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from agent.metrics.workload_labels import WORKLOAD_LABELS, workload_label_values
from agent.model import Workload, WorkloadHostSample
from gpufleet.metric_spec import MetricSpec

HOST_LABELS: tuple[str, ...] = ("node", "workload_kind", "workload_key", *WORKLOAD_LABELS)


def _host(name: str, unit: str, help_text: str) -> MetricSpec:
    return MetricSpec(name, "gauge", unit, HOST_LABELS, help_text)


HOST_METRICS: tuple[MetricSpec, ...] = (
    _host(
        "gpufleet_workload_host_cpu_cores",
        "cores",
        "CPU cores a GPU-holding workload used on its host over the last interval (cgroup).",
    ),
    _host(
        "gpufleet_workload_host_cpu_limit_cores",
        "cores",
        "The workload's cgroup CPU limit in cores (cpu.max); absent when unlimited.",
    ),
    _host(
        "gpufleet_workload_host_cpu_throttled_ratio",
        "ratio",
        "Share of the last interval's CPU quota periods in which the workload was throttled.",
    ),
    _host(
        "gpufleet_workload_host_memory_pressure_ratio",
        "ratio",
        "Share of time some of the workload's tasks stalled on memory (PSI some avg10).",
    ),
    _host(
        "gpufleet_workload_host_memory_used_bytes",
        "bytes",
        "Host memory the workload's cgroup uses (memory.current).",
    ),
    _host(
        "gpufleet_workload_host_memory_limit_bytes",
        "bytes",
        "The workload's cgroup memory limit (memory.max); absent when unlimited.",
    ),
)

_VALUES: dict[str, Callable[[WorkloadHostSample], float | None]] = {
    "gpufleet_workload_host_cpu_cores": lambda h: h.cpu_used_cores,
    "gpufleet_workload_host_cpu_limit_cores": lambda h: h.cpu_limit_cores,
    "gpufleet_workload_host_cpu_throttled_ratio": lambda h: h.cpu_throttled_ratio,
    "gpufleet_workload_host_memory_pressure_ratio": lambda h: h.memory_pressure_ratio,
    "gpufleet_workload_host_memory_used_bytes": lambda h: h.memory_used_bytes,
    "gpufleet_workload_host_memory_limit_bytes": lambda h: h.memory_limit_bytes,
}

HostRow = tuple[str, tuple[str, ...], float]


def host_rows(
    node: str, host: WorkloadHostSample, workloads: Mapping[str, Workload]
) -> Iterator[HostRow]:
    """(family, label values, value) of one host sample; KeyError when no GPU sample names
    its workload (the exporter skips and counts it)."""
    workload = workloads[host.workload_key]
    labels = (node, workload.kind.value, workload.key, *workload_label_values(workload))
    for name, read in _VALUES.items():
        value = read(host)
        if value is not None:
            yield name, labels, float(value)


def workloads_by_key(holders: Sequence[Sequence[Workload]]) -> dict[str, Workload]:
    """Every workload named in the GPU snapshot, by key."""
    return {w.key: w for workloads in holders for w in workloads}
