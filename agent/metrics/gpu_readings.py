"""What one scrape reads out of one GPU: a ``ScrapedGpu``, and its rows per catalogue family.

``gpu_readings`` turns a GPU's info and latest sample into the (label values, value) rows of
one agent catalogue family (agent/metrics/catalogue.py). A value of ``None`` gives no row
(never 0); the exporter (agent/metrics/exporter.py) adds the rows, and skips and counts a
family that fails for one GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agent.metrics.workload_labels import sorted_workloads, workload_label_values
from agent.model import THROTTLE_REASONS, GpuInfo, GpuSample, Workload
from gpufleet.metric_spec import MetricSpec


@dataclass(frozen=True)
class ScrapedGpu:
    """What one scrape knows about one GPU or MIG instance."""

    node: str
    info: GpuInfo
    sample: GpuSample | None
    workload: Workload | None
    xid_counts: dict[int, int]

    @property
    def identity(self) -> tuple[str, ...]:
        info = self.info
        parent = info.mig_parent_uuid or ""
        return (self.node, str(info.index), info.uuid, info.name, info.mig_profile or "", parent)

    @property
    def labels(self) -> tuple[str, ...]:
        """Values of catalogue.GPU_LABELS."""
        return self.identity + workload_label_values(self.workload)


Reading = tuple[tuple[str, ...], float]
_SCALARS: dict[str, Callable[[GpuSample], float | None]] = {
    "gpufleet_gpu_power_watts": lambda s: s.power_watts,
    "gpufleet_gpu_energy_joules_total": lambda s: s.energy_joules,
    "gpufleet_gpu_sm_activity_ratio": lambda s: s.sm_activity,
    "gpufleet_gpu_sm_occupancy_ratio": lambda s: s.sm_occupancy,
    "gpufleet_gpu_tensor_activity_ratio": lambda s: s.tensor_activity,
    "gpufleet_gpu_dram_activity_ratio": lambda s: s.dram_activity,
    "gpufleet_gpu_encoder_utilization_ratio": lambda s: s.encoder_activity,
    "gpufleet_gpu_decoder_utilization_ratio": lambda s: s.decoder_activity,
    "gpufleet_gpu_temperature_celsius": lambda s: s.temperature_celsius,
    "gpufleet_gpu_memory_temperature_celsius": lambda s: s.memory_temperature_celsius,
    "gpufleet_gpu_memory_used_bytes": lambda s: s.memory_used_bytes,
    "gpufleet_gpu_memory_reserved_bytes": lambda s: s.memory_reserved_bytes,
    "gpufleet_gpu_sm_clock_hertz": lambda s: s.sm_clock_hertz,
    "gpufleet_gpu_memory_clock_hertz": lambda s: s.memory_clock_hertz,
    "gpufleet_gpu_remapped_rows_pending": lambda s: s.remapped_rows_pending,
    "gpufleet_gpu_healthy": lambda s: s.healthy,
    "gpufleet_gpu_last_sample_timestamp_seconds": lambda s: s.timestamp,
    "gpufleet_gpu_activity_coarse": lambda s: (
        None if s.sm_activity is None and s.dram_activity is None else s.activity_coarse
    ),
    "gpufleet_gpu_process_count": lambda s: len(s.processes) if s.healthy else None,
    "gpufleet_gpu_pcie_link_generation": lambda s: s.pcie_link_generation,
    "gpufleet_gpu_pcie_link_generation_max": lambda s: s.pcie_link_generation_max,
    "gpufleet_gpu_pcie_link_width": lambda s: s.pcie_link_width,
    "gpufleet_gpu_pcie_link_width_max": lambda s: s.pcie_link_width_max,
    "gpufleet_gpu_pcie_replays_total": lambda s: s.pcie_replays_total,
    "gpufleet_gpu_fan_speed_ratio": lambda s: s.fan_speed_ratio,
    "gpufleet_gpu_retired_pages_total": lambda s: s.retired_pages_total,
    "gpufleet_gpu_retired_pages_pending": lambda s: s.retired_pages_pending,
    "gpufleet_gpu_sm_clock_default_hertz": lambda s: s.sm_clock_default_hertz,
}
_TYPED: dict[str, Callable[[GpuSample], tuple[tuple[str, float | None], ...]]] = {
    "gpufleet_gpu_ecc_errors_total": lambda s: (
        ("corrected", s.ecc_corrected_total),
        ("uncorrected", s.ecc_uncorrected_total),
    ),
    "gpufleet_gpu_remapped_rows": lambda s: (
        ("correctable", s.remapped_rows_correctable),
        ("uncorrectable", s.remapped_rows_uncorrectable),
    ),
    "gpufleet_gpu_pcie_throughput_bytes_per_second": lambda s: (
        ("tx", s.pcie_tx_bytes_per_second),
        ("rx", s.pcie_rx_bytes_per_second),
    ),
    "gpufleet_gpu_nvlink_throughput_bytes_per_second": lambda s: (
        ("tx", s.nvlink_tx_bytes_per_second),
        ("rx", s.nvlink_rx_bytes_per_second),
    ),
    "gpufleet_gpu_pipe_activity_ratio": lambda s: (
        ("fp64", s.fp64_activity),
        ("fp32", s.fp32_activity),
        ("fp16", s.fp16_activity),
    ),
    "gpufleet_gpu_throttle_reason": lambda s: tuple(
        (name, None if s.throttle_reasons is None else float(bool(s.throttle_reasons & bit)))
        for bit, name in THROTTLE_REASONS.items()
    ),
}


def gpu_readings(spec: MetricSpec, view: ScrapedGpu) -> list[Reading]:
    """(label values, value) rows of one catalogue family for one GPU; [] when unknown."""
    info, sample = view.info, view.sample
    if spec.name == "gpufleet_gpu_info":
        return [(view.identity + _info_extras(info), 1.0)]
    if spec.name == "gpufleet_gpu_workload_info":
        workloads = sorted_workloads(sample.workloads if sample is not None else ())
        return [(_workload_info_labels(view, w), 1.0) for w in workloads]
    if spec.name == "gpufleet_gpu_xid_errors_total":
        return [((*view.labels, str(xid)), n) for xid, n in sorted(view.xid_counts.items())]
    if spec.name == "gpufleet_gpu_power_limit_watts":
        return _present(view.labels, info.power_limit_watts)
    if spec.name == "gpufleet_gpu_memory_total_bytes":
        from_sample = sample.memory_total_bytes if sample is not None else None
        return _present(view.labels, from_sample or info.memory_total_bytes)
    if sample is None:
        return []
    if spec.name in _TYPED:
        typed = _TYPED[spec.name](sample)
        return [row for kind, value in typed for row in _present((*view.labels, kind), value)]
    return _present(view.labels, _SCALARS[spec.name](sample))


def _present(labels: tuple[str, ...], value: float | None) -> list[Reading]:
    return [] if value is None else [(labels, float(value))]


def _info_extras(info: GpuInfo) -> tuple[str, ...]:
    fields = (info.driver_version, info.cuda_version, info.architecture, info.pci_bus_id)
    return tuple(value or "" for value in fields)


def _workload_info_labels(view: ScrapedGpu, workload: Workload) -> tuple[str, ...]:
    head = (view.node, str(view.info.index), view.info.uuid, workload.kind.value, workload.key)
    return head + workload_label_values(workload)
