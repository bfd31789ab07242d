"""The agent's metric catalogue: every ``gpufleet_*`` family the node exporter can emit.

One row per family: exposed name, Prometheus type, unit, label names (in order) and help.
The exporter builds its families from these rows, and tests check that dashboards and
alert rules only use names and labels listed here. Names follow the Prometheus naming
guide: base units as suffixes, counters end in ``_total``, info families in ``_info``.

Workload labels use OpenTelemetry's names so they never clash with Prometheus target
labels (``namespace``, ``pod``, ``container``). A GPU series carries the labels of the
GPU's *primary* workload (see ``primary_workload`` in agent/metrics/exporter.py: a Kubernetes pod
first, then a Slurm job, then a manual label, then a bare process; ties broken by workload
key), so that ``sum by (k8s_namespace_name)`` works without a join. Every workload that holds
the GPU, primary or not, gets its own ``gpufleet_gpu_workload_info`` series.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)

from agent.model import Workload, WorkloadKind
from gpufleet.metric_spec import MetricSpec as MetricSpec
from gpufleet.metric_spec import MetricType

#: who the GPU is (index as a string, GPU or MIG UUID, model name, MIG profile and parent)
GPU_IDENTITY_LABELS: tuple[str, ...] = (
    "node",
    "gpu",
    "uuid",
    "model",
    "mig_profile",
    "mig_parent_uuid",
)
#: who holds it (OpenTelemetry names); empty strings when nobody does
WORKLOAD_LABELS: tuple[str, ...] = (
    "k8s_namespace_name",
    "k8s_pod_name",
    "k8s_container_name",
    "slurm_job_id",
)
GPU_LABELS: tuple[str, ...] = GPU_IDENTITY_LABELS + WORKLOAD_LABELS

_HELD = " Labels name the GPU's primary workload; see gpufleet_gpu_workload_info for all."


def _gpu(name: str, typ: MetricType, unit: str, help_text: str, *extra: str) -> MetricSpec:
    return MetricSpec(name, typ, unit, GPU_LABELS + extra, help_text + _HELD)


GPU_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(
        "gpufleet_gpu_info",
        "info",
        "",
        (*GPU_IDENTITY_LABELS, "driver_version", "cuda_version", "architecture", "pci_bus_id"),
        "GPU or MIG instance identity; always 1. Missing fields are empty strings.",
    ),
    MetricSpec(
        "gpufleet_gpu_workload_info",
        "info",
        "",
        ("node", "gpu", "uuid", "workload_kind", "workload_key", *WORKLOAD_LABELS),
        "One series per workload holding the GPU (several when a GPU is shared); always 1.",
    ),
    _gpu("gpufleet_gpu_power_watts", "gauge", "watts", "Power draw in watts."),
    _gpu("gpufleet_gpu_power_limit_watts", "gauge", "watts", "Enforced power limit in watts."),
    _gpu(
        "gpufleet_gpu_energy_joules_total",
        "counter",
        "joules",
        "NVML total energy counter in joules since driver load; resets on driver reload.",
    ),
    _gpu(
        "gpufleet_gpu_sm_activity_ratio",
        "gauge",
        "ratio",
        "SM activity 0..1: GPM SM utilisation, or NVML utilization.gpu/100 when "
        "gpufleet_gpu_activity_coarse is 1.",
    ),
    _gpu("gpufleet_gpu_sm_occupancy_ratio", "gauge", "ratio", "GPM SM occupancy 0..1."),
    _gpu("gpufleet_gpu_tensor_activity_ratio", "gauge", "ratio", "GPM tensor-core activity 0..1."),
    _gpu(
        "gpufleet_gpu_dram_activity_ratio",
        "gauge",
        "ratio",
        "Device memory bandwidth activity 0..1: GPM DRAM bandwidth utilisation, or NVML "
        "utilization.memory/100 when gpufleet_gpu_activity_coarse is 1.",
    ),
    _gpu(
        "gpufleet_gpu_activity_coarse",
        "gauge",
        "",
        "1 when the activity ratios come from NVML's coarse utilisation counters "
        "('a kernel was running'), 0 when from GPM.",
    ),
    _gpu("gpufleet_gpu_temperature_celsius", "gauge", "celsius", "GPU core temperature."),
    _gpu("gpufleet_gpu_memory_temperature_celsius", "gauge", "celsius", "HBM temperature."),
    _gpu("gpufleet_gpu_memory_used_bytes", "gauge", "bytes", "Device memory in use."),
    _gpu("gpufleet_gpu_memory_total_bytes", "gauge", "bytes", "Device memory capacity."),
    _gpu(
        "gpufleet_gpu_memory_reserved_bytes",
        "gauge",
        "bytes",
        "Device memory reserved by the driver (NVML memory info v2 only).",
    ),
    _gpu("gpufleet_gpu_sm_clock_hertz", "gauge", "hertz", "SM clock frequency."),
    _gpu("gpufleet_gpu_memory_clock_hertz", "gauge", "hertz", "Memory clock frequency."),
    _gpu(
        "gpufleet_gpu_throttle_reason",
        "gauge",
        "",
        "1 when the NVML clocks-event (throttle) reason is active, else 0; one series per "
        "reason in agent.model.THROTTLE_REASONS.",
        "reason",
    ),
    _gpu(
        "gpufleet_gpu_xid_errors_total",
        "counter",
        "",
        "XID events seen by this agent since it started, per XID code.",
        "xid",
    ),
    _gpu(
        "gpufleet_gpu_ecc_errors_total",
        "counter",
        "",
        "Volatile ECC errors since driver load; type is corrected or uncorrected.",
        "type",
    ),
    _gpu(
        "gpufleet_gpu_remapped_rows",
        "gauge",
        "",
        "Rows remapped because of memory errors; type is correctable or uncorrectable.",
        "type",
    ),
    _gpu(
        "gpufleet_gpu_remapped_rows_pending",
        "gauge",
        "",
        "1 when a row remapping is pending (takes effect at the next GPU reset).",
    ),
    _gpu(
        "gpufleet_gpu_healthy",
        "gauge",
        "",
        "1 when NVML could read the GPU, 0 when it fell off the bus or its reads failed.",
    ),
    _gpu("gpufleet_gpu_process_count", "gauge", "", "Processes with a context on the GPU."),
    _gpu(
        "gpufleet_gpu_last_sample_timestamp_seconds",
        "gauge",
        "seconds",
        "Unix time of the latest sample of this GPU (event time).",
    ),
)

AGENT_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("gpufleet_agent_info", "info", "", ("node", "version"), "The agent; always 1."),
    MetricSpec("gpufleet_agent_reads_total", "counter", "", ("node",), "Reads of every GPU."),
    MetricSpec(
        "gpufleet_agent_read_seconds_total",
        "counter",
        "seconds",
        ("node",),
        "Wall time spent reading the GPUs.",
    ),
    MetricSpec(
        "gpufleet_agent_last_read_seconds",
        "gauge",
        "seconds",
        ("node",),
        "Wall time the latest read of every GPU took.",
    ),
    MetricSpec(
        "gpufleet_agent_field_errors_total",
        "counter",
        "",
        ("node", "uuid", "field"),
        "Failed reads of one field of one GPU (the field is then reported as missing).",
    ),
    MetricSpec(
        "gpufleet_agent_export_errors_total",
        "counter",
        "",
        ("node", "uuid", "metric"),
        "Series the exporter skipped because a value could not be exported.",
    ),
    MetricSpec(
        "gpufleet_agent_batches_sent_total",
        "counter",
        "",
        ("node",),
        "Batches the collector acknowledged.",
    ),
    MetricSpec(
        "gpufleet_agent_batches_failed_total",
        "counter",
        "",
        ("node",),
        "Batch sends that failed (the batch stays spooled and is retried).",
    ),
    MetricSpec(
        "gpufleet_agent_samples_sent_total",
        "counter",
        "",
        ("node",),
        "GPU samples in acknowledged batches.",
    ),
    MetricSpec(
        "gpufleet_agent_spool_bytes", "gauge", "bytes", ("node",), "Size of the on-disk spool."
    ),
    MetricSpec(
        "gpufleet_agent_spool_batches",
        "gauge",
        "",
        ("node",),
        "Batches in the spool waiting for an acknowledgement.",
    ),
    MetricSpec(
        "gpufleet_agent_spool_dropped_batches_total",
        "counter",
        "",
        ("node",),
        "Batches dropped from the spool past its size or age bound (data lost).",
    ),
    MetricSpec(
        "gpufleet_agent_spool_dropped_samples_total",
        "counter",
        "",
        ("node",),
        "GPU samples in batches dropped from the spool (data lost).",
    ),
    MetricSpec(
        "gpufleet_agent_unhealthy_gpus",
        "gauge",
        "",
        ("node",),
        "GPUs whose latest read failed.",
    ),
)

CATALOGUE: tuple[MetricSpec, ...] = GPU_METRICS + AGENT_METRICS


def spec_by_name(name: str) -> MetricSpec:
    """The catalogue row for an exposed name; KeyError names the unknown metric."""
    for spec in CATALOGUE:
        if spec.name == name:
            return spec
    raise KeyError(f"metric {name!r} is not in the agent catalogue")


#: which workload's labels a shared GPU's series carry: pods first, then Slurm jobs, ...
_KIND_RANK = {
    WorkloadKind.KUBERNETES_POD: 0,
    WorkloadKind.SLURM_JOB: 1,
    WorkloadKind.MANUAL: 2,
    WorkloadKind.PROCESS: 3,
}


def sorted_workloads(workloads: Iterable[Workload]) -> list[Workload]:
    """Workloads in a stable order, primary first (pod, Slurm job, manual, process; by key)."""
    return sorted(workloads, key=lambda w: (_KIND_RANK.get(w.kind, 9), w.key))


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


def new_family(spec: MetricSpec) -> Metric:
    """An empty prometheus_client family for a catalogue row."""
    labels = list(spec.labels)
    if spec.type == "counter":
        return CounterMetricFamily(spec.name.removesuffix("_total"), spec.help, labels=labels)
    if spec.type == "info":
        return InfoMetricFamily(spec.name.removesuffix("_info"), spec.help, labels=labels)
    return GaugeMetricFamily(spec.name, spec.help, labels=labels)


class FamilySet:
    """Fresh families for one scrape, filled row by row; empty families are not emitted."""

    def __init__(self, specs: Sequence[MetricSpec]) -> None:
        self._specs = {spec.name: spec for spec in specs}
        self._families: dict[str, Metric] = {spec.name: new_family(spec) for spec in specs}
        self._seen: set[tuple[str, tuple[str, ...]]] = set()

    def add(self, name: str, label_values: Sequence[str], value: float) -> None:
        """Add one sample; ``label_values`` follow the row's ``labels`` order.

        Raises ValueError for a wrong label count or a repeated series (Prometheus rejects
        a whole scrape that holds one series twice).
        """
        spec = self._specs[name]
        if len(label_values) != len(spec.labels):
            raise ValueError(f"{name}: {len(label_values)} label values for {spec.labels}")
        key = (name, tuple(label_values))
        if key in self._seen:
            raise ValueError(f"{name}: series {label_values} added twice")
        self._seen.add(key)
        family = self._families[name]
        if isinstance(family, InfoMetricFamily):
            family.add_metric(list(label_values), {})
        elif isinstance(family, CounterMetricFamily | GaugeMetricFamily):
            family.add_metric(list(label_values), value)

    def metrics(self) -> list[Metric]:
        return [family for family in self._families.values() if family.samples]
