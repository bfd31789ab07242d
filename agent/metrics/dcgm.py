"""dcgm-exporter families from our samples, so dashboards built for it work unmodified.

The fields, their units and labels are agent/metrics/dcgm_fields.py's (4.8.x) and
agent/metrics/dcgm_naming.py's (4.9); this module converts our SI samples to DCGM's 4.8
units (MHz, MiB, mJ, %), scales them to the chosen naming's, and labels each series. A
field is emitted only for GPUs where we have a value.

Labels that do not apply are empty strings, which Prometheus stores as absent. As in
dcgm-exporter, a MIG instance's ``gpu`` and ``UUID`` are its parent's.

Differences from dcgm-exporter, on purpose:

- Device-level fields (power, energy, clocks, temperature) appear once, on the physical
  GPU's series, never copied onto every MIG instance (dcgm-exporter repeats the parent's
  value per instance, so sums double count).
- dcgm-exporter declares its counters without ``_total``; prometheus_client only emits
  ``_total`` counters, so these families are exposed *untyped* under their exact names.
  PromQL (``rate``, ``increase``) treats them the same.
- A GPU shared by several workloads (time-slicing, MPS, HAMi, Volcano) gets one series
  per workload, each with its own values, not copies of the GPU's: ``GPU_UTIL`` and
  ``GR_ENGINE_ACTIVE`` are its processes' SM share (NVML per-process utilisation), ``FB_USED``
  its processes' memory. Device-level fields appear once, on the primary workload's
  series, with the GPU's values; ``FB_FREE`` is left out (per pod it has no meaning).
  Where no holder's process reports an SM share, utilisation is left out of the per-pod
  series; where none reports a share or memory either, the GPU has one series, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import msgspec
from prometheus_client.metrics_core import GaugeMetricFamily, Metric, UnknownMetricFamily

from agent.metrics.dcgm_fields import DCGM_METRICS, XID_MESSAGES, DcgmSpec
from agent.metrics.workload_labels import sorted_workloads
from agent.model import GpuInfo, GpuSample, Workload, WorkloadKind

MIB = 1024 * 1024


class DcgmInput(NamedTuple):
    """One GPU or MIG instance with a sample, as the exporter hands it over."""

    info: GpuInfo
    #: the physical GPU of a MIG instance (None for a whole GPU or an unknown parent)
    parent: GpuInfo | None
    sample: GpuSample
    workload: Workload | None
    #: the latest XID code seen since the agent started
    last_xid: int | None
    #: on a shared GPU: this workload's own values (``shared_gpu_inputs``); None: the GPU's
    own: GpuSample | None = None
    #: on a shared GPU: whether this is the primary workload's series (device-level fields)
    primary: bool = True


def _ratio_to_percent(value: float | None) -> float | None:
    return None if value is None else value * 100.0


def _mib(value: int | None) -> float | None:
    return None if value is None else float(value // MIB)


def _fb_free(sample: GpuSample) -> float | None:
    total, used = sample.memory_total_bytes, sample.memory_used_bytes
    if total is None or used is None:
        return None
    return float(max(total - used - (sample.memory_reserved_bytes or 0), 0) // MIB)


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def _sm_active(sample: GpuSample) -> float | None:
    # the coarse counter ("a kernel was running") overstates SM activity: never pass it off
    return None if sample.activity_coarse else sample.sm_activity


#: how each field is computed from a sample (SI units in, DCGM units out).
#: GPU_UTIL, MEM_COPY_UTIL, GR_ENGINE_ACTIVE and DRAM_ACTIVE come from our activity ratios
#: whichever way they were measured: exact for NVML's coarse counters (the numbers DCGM
#: reads), and SM / DRAM-bandwidth utilisation from GPM on Hopper+, which is at most the
#: engine-busy figure. SM_ACTIVE and SM_OCCUPANCY come from GPM only.
_VALUES: dict[str, Callable[[GpuSample], float | None]] = {
    "DCGM_FI_DEV_SM_CLOCK": lambda s: _scaled(s.sm_clock_hertz, 1e-6),
    "DCGM_FI_DEV_MEM_CLOCK": lambda s: _scaled(s.memory_clock_hertz, 1e-6),
    "DCGM_FI_DEV_MEMORY_TEMP": lambda s: s.memory_temperature_celsius,
    "DCGM_FI_DEV_GPU_TEMP": lambda s: s.temperature_celsius,
    "DCGM_FI_DEV_POWER_USAGE": lambda s: s.power_watts,
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": lambda s: _scaled(s.energy_joules, 1e3),
    "DCGM_FI_DEV_GPU_UTIL": lambda s: _ratio_to_percent(s.sm_activity),
    "DCGM_FI_DEV_MEM_COPY_UTIL": lambda s: _ratio_to_percent(s.dram_activity),
    "DCGM_FI_DEV_ENC_UTIL": lambda s: _ratio_to_percent(s.encoder_activity),
    "DCGM_FI_DEV_DEC_UTIL": lambda s: _ratio_to_percent(s.decoder_activity),
    "DCGM_FI_DEV_FB_FREE": _fb_free,
    "DCGM_FI_DEV_FB_USED": lambda s: _mib(s.memory_used_bytes),
    "DCGM_FI_DEV_FB_RESERVED": lambda s: _mib(s.memory_reserved_bytes),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": lambda s: s.remapped_rows_uncorrectable,
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": lambda s: s.remapped_rows_correctable,
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": lambda s: s.ecc_corrected_total,
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": lambda s: s.ecc_uncorrected_total,
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": lambda s: s.throttle_reasons,
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": lambda s: s.sm_activity,
    "DCGM_FI_PROF_SM_ACTIVE": _sm_active,
    "DCGM_FI_PROF_SM_OCCUPANCY": lambda s: s.sm_occupancy,
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": lambda s: s.tensor_activity,
    "DCGM_FI_PROF_DRAM_ACTIVE": lambda s: s.dram_activity,
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE": lambda s: s.fp64_activity,
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE": lambda s: s.fp32_activity,
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE": lambda s: s.fp16_activity,
    "DCGM_FI_PROF_PCIE_TX_BYTES": lambda s: s.pcie_tx_bytes_per_second,
    "DCGM_FI_PROF_PCIE_RX_BYTES": lambda s: s.pcie_rx_bytes_per_second,
    "DCGM_FI_PROF_NVLINK_TX_BYTES": lambda s: s.nvlink_tx_bytes_per_second,
    "DCGM_FI_PROF_NVLINK_RX_BYTES": lambda s: s.nvlink_rx_bytes_per_second,
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": lambda s: s.pcie_replays_total,
    "DCGM_FI_DEV_PCIE_LINK_GEN": lambda s: s.pcie_link_generation,
    "DCGM_FI_DEV_PCIE_LINK_WIDTH": lambda s: s.pcie_link_width,
    "DCGM_FI_DEV_PCIE_MAX_LINK_GEN": lambda s: s.pcie_link_generation_max,
    "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH": lambda s: s.pcie_link_width_max,
    "DCGM_FI_DEV_FAN_SPEED": lambda s: _ratio_to_percent(s.fan_speed_ratio),
    "DCGM_FI_DEV_RETIRED_PENDING": lambda s: s.retired_pages_pending,
    # 4.9 fields whose unit differs from their 4.8 twin's (agent/metrics/dcgm_naming.py)
    "DCGM_FI_DEV_SM_CLOCK_HERTZ": lambda s: s.sm_clock_hertz,
    "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ": lambda s: s.memory_clock_hertz,
    "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL": lambda s: s.energy_joules,
    "DCGM_FI_DEV_GPU_UTIL_RATIO": lambda s: s.sm_activity,
    "DCGM_FI_DEV_FAN_SPEED_RATIO": lambda s: s.fan_speed_ratio,
}


def dcgm_label_values(node: str, item: DcgmInput) -> tuple[str, ...]:
    """Values of DCGM_LABELS for one GPU or MIG instance."""
    info, physical = item.info, item.parent or item.info
    mig = info.mig_parent_uuid is not None
    gpu = str(physical.index)
    workload = item.workload
    pod = workload if workload and workload.kind is WorkloadKind.KUBERNETES_POD else None
    job = workload.slurm_job_id if workload else None
    if workload and workload.kind is WorkloadKind.SLURM_JOB:
        job = job or workload.id
    return (
        gpu,
        info.mig_parent_uuid or info.uuid,
        info.pci_bus_id or physical.pci_bus_id or "",
        f"nvidia{gpu}",
        physical.name,
        (info.mig_profile or "") if mig else "",
        _gpu_instance_id(info) if mig else "",
        node,
        info.driver_version or physical.driver_version or "",
        (pod.name or "") if pod else "",
        (pod.namespace or "") if pod else "",
        (pod.container or "") if pod else "",
        job or "",
    )


def _gpu_instance_id(info: GpuInfo) -> str:
    # GpuInfo has no GPU-instance id yet (a field ``mig_gpu_instance_id`` is proposed);
    # until it does, the MIG UUID stands in: unique, so two instances of one profile on
    # one GPU never collapse into one series, and never a made-up number.
    value = getattr(info, "mig_gpu_instance_id", None)
    return info.uuid if value is None else str(value)


#: what a workload on a shared GPU gets of its own (by the 4.8 name its value comes from,
#: so the 4.9 names of the same fields do too); the rest are the device's
_OWN_FIELDS = frozenset(
    ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED")
)


def shared_gpu_inputs(item: DcgmInput) -> list[DcgmInput]:
    """``item`` once per workload on its GPU, primary first, each with its own values
    (its processes' SM share and memory); ``[item]`` when one workload or none holds it."""
    holders = sorted_workloads({w.key: w for w in item.sample.workloads}.values())
    keys = {w.key for w in holders}
    processes = [p for p in item.sample.processes if p.workload and p.workload.key in keys]
    known = any(p.sm_share is not None for p in processes)
    if len(holders) < 2 or not (known or any(p.used_memory_bytes for p in processes)):
        return [item]  # nothing tells the holders apart: the GPU's series, as before
    out = []
    for rank, holder in enumerate(holders):
        mine = [p for p in processes if p.workload is not None and p.workload.key == holder.key]
        share = min(1.0, sum(p.sm_share or 0.0 for p in mine)) if known else None
        memory = [p.used_memory_bytes for p in mine if p.used_memory_bytes is not None]
        own = msgspec.structs.replace(
            item.sample,
            sm_activity=share,
            memory_used_bytes=sum(memory) if memory or known else None,
        )
        out.append(item._replace(workload=holder, own=own, primary=rank == 0))
    return out


def dcgm_descriptions(specs: Sequence[DcgmSpec] = DCGM_METRICS) -> list[Metric]:
    """Empty families for ``Collector.describe``."""
    return [_family(spec) for spec in specs]


def dcgm_families(
    node: str,
    items: Sequence[DcgmInput],
    on_error: Callable[[str, str], None],
    specs: Sequence[DcgmSpec] = DCGM_METRICS,
) -> list[Metric]:
    """One family per DCGM field of ``specs`` (one naming's, see dcgm_naming.py) that has
    a value for at least one GPU.

    A field that fails for one GPU is skipped for that GPU and reported through
    ``on_error(gpu_uuid, field_name)``.
    """
    labelled = [(item, dcgm_label_values(node, item)) for item in items]
    families: list[Metric] = []
    for spec in specs:
        family = _family(spec)
        seen: set[tuple[str, ...]] = set()
        for item, labels in labelled:
            try:
                row = _row(spec, item, labels)
            except Exception:
                on_error(item.info.uuid, spec.name)
                continue
            if row is None:
                continue
            if row[0] in seen:  # a duplicate series would make Prometheus reject the scrape
                on_error(item.info.uuid, spec.name)
                continue
            seen.add(row[0])
            family.add_metric(list(row[0]), row[1])
        if family.samples:
            families.append(family)
    return families


_Row = tuple[tuple[str, ...], float]


def _row(spec: DcgmSpec, item: DcgmInput, labels: tuple[str, ...]) -> _Row | None:
    if not spec.on_mig and item.info.mig_parent_uuid is not None:
        return None
    sample = item.sample
    if item.own is not None:
        if spec.value_of in _OWN_FIELDS:
            sample = item.own
        elif not item.primary or spec.value_of == "DCGM_FI_DEV_FB_FREE":
            return None
    if spec.value_of == "DCGM_FI_DEV_XID_ERRORS":
        return _xid_row(item, labels)
    value = _VALUES[spec.value_of](sample)
    if value is None:
        return None
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(f"{spec.name}: not a finite number: {value!r}")
    return labels, number


def _xid_row(item: DcgmInput, labels: tuple[str, ...]) -> _Row | None:
    xid = item.last_xid
    if xid is None and not item.sample.healthy:
        return None  # a lost GPU cannot tell us it had no XID
    code = xid or 0
    return (*labels, str(code), XID_MESSAGES.get(code, "")), float(code)


def _family(spec: DcgmSpec) -> GaugeMetricFamily | UnknownMetricFamily:
    labels = list(spec.labels)
    if spec.type == "counter":
        return UnknownMetricFamily(spec.name, spec.help, labels=labels)
    return GaugeMetricFamily(spec.name, spec.help, labels=labels)
