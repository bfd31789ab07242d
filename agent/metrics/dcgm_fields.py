"""dcgm-exporter 4.8.x fields as it exposes them: names, units, help strings and labels.

(The 4.9 names and units of the same fields are agent/metrics/dcgm_naming.py's.)

Each ``DcgmSpec`` is one DCGM field: the field name verbatim, DCGM's unit (MHz, MiB, mJ, %),
and the help string of dcgm-exporter's default counters file. How each is computed from our
samples, and how its series are labelled, is agent/metrics/dcgm.py's.

``DCGM_LABELS`` follow dcgm-exporter's GPU template: ``gpu``, ``UUID``, ``pci_bus_id``,
``device`` (``nvidia<gpu>``), ``modelName``, ``GPU_I_PROFILE`` and ``GPU_I_ID`` (MIG
instances only), ``Hostname``, the label field ``DCGM_FI_DRIVER_VERSION``, and ``pod``,
``namespace``, ``container`` (the GPU's primary Kubernetes workload) and ``hpc_job`` (its
Slurm job). dcgm-exporter 4.8.3 renamed ``Hostname`` to ``hostname``; we keep the name used
from 2.x to 4.8.2.

Default counters we cannot produce (``UNSUPPORTED``) are left out rather than faked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DCGM_LABELS: tuple[str, ...] = (
    "gpu",
    "UUID",
    "pci_bus_id",
    "device",
    "modelName",
    "GPU_I_PROFILE",
    "GPU_I_ID",
    "Hostname",
    "DCGM_FI_DRIVER_VERSION",
    "pod",
    "namespace",
    "container",
    "hpc_job",
)
XID_LABELS: tuple[str, ...] = (*DCGM_LABELS, "err_code", "err_msg")


@dataclass(frozen=True)
class DcgmSpec:
    name: str
    #: dcgm-exporter's declared type; counters are exposed untyped (see agent/metrics/dcgm.py)
    type: Literal["gauge", "counter"]
    #: DCGM's unit for the value ("MHz", "C", "W", "mJ", "%", "MiB", "ratio", "")
    unit: str
    help: str
    labels: tuple[str, ...] = DCGM_LABELS
    #: False for DCGM_FI_DEV_*_UTIL fields, which DCGM does not report for MIG instances,
    #: and for the board's fields (fan, PCIe link, replays, traffic), which are the GPU's
    on_mig: bool = True
    #: the 4.8 name whose value this field reports (set for 4.9 names; see dcgm_naming.py)
    source: str = ""

    @property
    def value_of(self) -> str:
        """The 4.8 field name whose computation (agent/metrics/dcgm.py) gives the value."""
        return self.source or self.name


DCGM_METRICS: tuple[DcgmSpec, ...] = (
    DcgmSpec("DCGM_FI_DEV_SM_CLOCK", "gauge", "MHz", "SM clock frequency (in MHz)."),
    DcgmSpec("DCGM_FI_DEV_MEM_CLOCK", "gauge", "MHz", "Memory clock frequency (in MHz)."),
    DcgmSpec("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "C", "Memory temperature (in C)."),
    DcgmSpec("DCGM_FI_DEV_GPU_TEMP", "gauge", "C", "GPU temperature (in C)."),
    DcgmSpec("DCGM_FI_DEV_POWER_USAGE", "gauge", "W", "Power draw (in W)."),
    DcgmSpec(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "mJ",
        "Total energy consumption since boot (in mJ).",
    ),
    DcgmSpec("DCGM_FI_DEV_GPU_UTIL", "gauge", "%", "GPU utilization (in %).", on_mig=False),
    DcgmSpec("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "%", "Memory utilization (in %).", on_mig=False),
    DcgmSpec("DCGM_FI_DEV_ENC_UTIL", "gauge", "%", "Encoder utilization (in %).", on_mig=False),
    DcgmSpec("DCGM_FI_DEV_DEC_UTIL", "gauge", "%", "Decoder utilization (in %).", on_mig=False),
    DcgmSpec(
        "DCGM_FI_DEV_XID_ERRORS",
        "gauge",
        "",
        "Value of the last XID error encountered.",
        labels=XID_LABELS,
    ),
    DcgmSpec("DCGM_FI_DEV_FB_FREE", "gauge", "MiB", "Framebuffer memory free (in MiB)."),
    DcgmSpec("DCGM_FI_DEV_FB_USED", "gauge", "MiB", "Framebuffer memory used (in MiB)."),
    DcgmSpec("DCGM_FI_DEV_FB_RESERVED", "gauge", "MiB", "Framebuffer memory reserved (in MiB)."),
    DcgmSpec(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "",
        "Number of remapped rows for uncorrectable errors",
    ),
    DcgmSpec(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "counter",
        "",
        "Number of remapped rows for correctable errors",
    ),
    DcgmSpec(
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "counter",
        "",
        "Total number of single-bit volatile ECC errors.",
    ),
    DcgmSpec(
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "counter",
        "",
        "Total number of double-bit volatile ECC errors.",
    ),
    DcgmSpec(
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "gauge",
        "",
        "Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*).",
    ),
    DcgmSpec(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "gauge",
        "ratio",
        "Ratio of time the graphics engine is active.",
    ),
    DcgmSpec(
        "DCGM_FI_PROF_SM_ACTIVE",
        "gauge",
        "ratio",
        "The ratio of cycles an SM has at least 1 warp assigned.",
    ),
    DcgmSpec(
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "gauge",
        "ratio",
        "The ratio of number of warps resident on an SM.",
    ),
    DcgmSpec(
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gauge",
        "ratio",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
    ),
    DcgmSpec(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "ratio",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
    # issue 24's bottleneck signals
    DcgmSpec(
        "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
        "gauge",
        "ratio",
        "Ratio of cycles the fp64 pipes are active.",
    ),
    DcgmSpec(
        "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
        "gauge",
        "ratio",
        "Ratio of cycles the fp32 pipes are active.",
    ),
    DcgmSpec(
        "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
        "gauge",
        "ratio",
        "Ratio of cycles the fp16 pipes are active.",
    ),
    DcgmSpec(
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        "B/s",
        "The rate of data transmitted over the PCIe bus - including both protocol headers and "
        "data payloads - in bytes per second.",
        on_mig=False,
    ),
    DcgmSpec(
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        "B/s",
        "The rate of data received over the PCIe bus - including both protocol headers and "
        "data payloads - in bytes per second.",
        on_mig=False,
    ),
    DcgmSpec(
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "gauge",
        "B/s",
        "The rate of data transmitted over NVLink - including both protocol headers and "
        "data payloads - in bytes per second.",
        on_mig=False,
    ),
    DcgmSpec(
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "gauge",
        "B/s",
        "The rate of data received over NVLink - including both protocol headers and "
        "data payloads - in bytes per second.",
        on_mig=False,
    ),
    DcgmSpec(
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "counter",
        "",
        "Total number of PCIe retries.",
        on_mig=False,
    ),
    DcgmSpec(
        "DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "", "PCIe current link generation.", on_mig=False
    ),
    DcgmSpec("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", "", "PCIe current link width.", on_mig=False),
    DcgmSpec(
        "DCGM_FI_DEV_PCIE_MAX_LINK_GEN", "gauge", "", "PCIe maximum link generation.", on_mig=False
    ),
    DcgmSpec(
        "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", "gauge", "", "PCIe maximum link width.", on_mig=False
    ),
    DcgmSpec("DCGM_FI_DEV_FAN_SPEED", "gauge", "%", "Fan speed (in %).", on_mig=False),
    DcgmSpec(
        "DCGM_FI_DEV_RETIRED_PENDING",
        "counter",
        "",
        "Total number of pages pending retirement.",
        on_mig=False,
    ),
)

#: active rows of dcgm-exporter's default counters file that we do not emit, and why
UNSUPPORTED: dict[str, str] = {
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "its unit (MB/s or MiB/s, TX+RX) is unverified; "
    "DCGM_FI_PROF_NVLINK_TX_BYTES and _RX_BYTES carry the traffic",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS": "vGPU licensing is out of scope (no vGPU support)",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "GpuSample has remap pending, not remap failure",
}
#: optional (commented-out) rows we also do not emit, and why
NOT_EMITTED_OPTIONAL: dict[str, str] = {
    "DCGM_FI_DEV_RETIRED_SBE": "GpuSample carries single- plus double-bit retired pages summed",
    "DCGM_FI_DEV_RETIRED_DBE": "GpuSample carries single- plus double-bit retired pages summed",
}

#: a few XID codes' meanings, from NVIDIA's XID catalogue; others get an empty err_msg
XID_MESSAGES: dict[int, str] = {
    0: "No Error",
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "Preemptive cleanup, due to previous errors",
    48: "Double Bit ECC Error",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "GSP RPC Timeout",
    120: "GSP Error",
}
