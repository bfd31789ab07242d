"""The agent's metric catalogue: every ``gpufleet_*`` family the node exporter can emit.

One row per family: exposed name, Prometheus type, unit, label names (in order) and help.
The exporter builds its families from these rows, and tests check that dashboards and
alert rules only use names and labels listed here. Names follow the Prometheus naming
guide: base units as suffixes, counters end in ``_total``, info families in ``_info``.

Workload labels use OpenTelemetry's names so they never clash with Prometheus target
labels (``namespace``, ``pod``, ``container``). A GPU series carries the labels of the
GPU's *primary* workload (see ``primary_workload`` in agent/metrics/workload_labels.py: a
Kubernetes pod first, then a Slurm job, then a manual label, then a bare process; ties broken
by workload key), so that ``sum by (k8s_namespace_name)`` works without a join. Every workload
that holds the GPU, primary or not, gets its own ``gpufleet_gpu_workload_info`` series.

The families a scrape fills from these rows are agent/metrics/families.py's. The
per-workload host rows (``gpufleet_workload_host_*``) are agent/metrics/host_catalogue.py's.
"""

from __future__ import annotations

from agent.metrics.host_catalogue import HOST_METRICS
from agent.metrics.workload_labels import WORKLOAD_LABELS
from gpufleet.metric_spec import MetricSpec, MetricType

#: who the GPU is (index as a string, GPU or MIG UUID, model name, MIG profile and parent)
GPU_IDENTITY_LABELS: tuple[str, ...] = (
    "node",
    "gpu",
    "uuid",
    "model",
    "mig_profile",
    "mig_parent_uuid",
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
    _gpu("gpufleet_gpu_encoder_utilization_ratio", "gauge", "ratio", "NVENC busy share 0..1."),
    _gpu("gpufleet_gpu_decoder_utilization_ratio", "gauge", "ratio", "NVDEC busy share 0..1."),
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
    # issue 24's bottleneck signals
    _gpu(
        "gpufleet_gpu_pcie_throughput_bytes_per_second",
        "gauge",
        "bytes_per_second",
        "PCIe traffic since the previous read, headers included; direction is tx or rx.",
        "direction",
    ),
    _gpu(
        "gpufleet_gpu_nvlink_throughput_bytes_per_second",
        "gauge",
        "bytes_per_second",
        "NVLink traffic over all links since the previous read; direction is tx or rx.",
        "direction",
    ),
    _gpu(
        "gpufleet_gpu_pipe_activity_ratio",
        "gauge",
        "ratio",
        "GPM non-tensor pipe activity 0..1; pipe is fp64, fp32 or fp16.",
        "pipe",
    ),
    _gpu("gpufleet_gpu_pcie_link_generation", "gauge", "", "PCIe link generation now."),
    _gpu("gpufleet_gpu_pcie_link_generation_max", "gauge", "", "Highest PCIe generation."),
    _gpu("gpufleet_gpu_pcie_link_width", "gauge", "", "PCIe link width (lanes) now."),
    _gpu("gpufleet_gpu_pcie_link_width_max", "gauge", "", "Widest PCIe link (lanes)."),
    _gpu("gpufleet_gpu_pcie_replays_total", "counter", "", "PCIe replays since driver load."),
    _gpu("gpufleet_gpu_fan_speed_ratio", "gauge", "ratio", "Fan speed 0..1 of its maximum."),
    _gpu(
        "gpufleet_gpu_retired_pages_total",
        "counter",
        "",
        "Memory pages retired for ECC errors (before Ampere; later GPUs remap rows).",
    ),
    _gpu(
        "gpufleet_gpu_retired_pages_pending",
        "gauge",
        "",
        "1 when a page retirement waits for the next driver reload.",
    ),
    _gpu(
        "gpufleet_gpu_sm_clock_default_hertz",
        "gauge",
        "hertz",
        "Default applications SM clock: a busy GPU below it is held back.",
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
    # What the collector answered (agent/refusals.py): held, refused, split, late, waits.
    MetricSpec(
        "gpufleet_agent_batches_held_total",
        "counter",
        "",
        ("node", "reason"),
        "Sends refused for a reason someone can fix (clock, version, token, a proxy): kept.",
    ),
    MetricSpec(
        "gpufleet_agent_batches_refused_total",
        "counter",
        "",
        ("node", "reason"),
        "Batches the collector refused for good, by its reason (dropped: data lost).",
    ),
    MetricSpec(
        "gpufleet_agent_batches_split_total",
        "counter",
        "",
        ("node",),
        "Batches sent again as two halves after HTTP 413.",
    ),
    MetricSpec(
        "gpufleet_agent_samples_late_total",
        "counter",
        "",
        ("node",),
        "Accepted samples the collector could not account: behind event time it had applied.",
    ),
    MetricSpec(
        "gpufleet_agent_collector_retry_after_seconds",
        "gauge",
        "seconds",
        ("node",),
        "The wait the collector last asked for (Retry-After, clamped); 0 after a delivery.",
    ),
    MetricSpec(
        "gpufleet_agent_memory_batches",
        "gauge",
        "",
        ("node",),
        "Batches the spool could not store, held in memory only (lost on restart).",
    ),
)

CATALOGUE: tuple[MetricSpec, ...] = GPU_METRICS + AGENT_METRICS + HOST_METRICS


def spec_by_name(name: str) -> MetricSpec:
    """The catalogue row for an exposed name; KeyError names the unknown metric."""
    for spec in CATALOGUE:
        if spec.name == name:
            return spec
    raise KeyError(f"metric {name!r} is not in the agent catalogue")
