"""Scenario files for the fake NVML library: what GPUs a fake system has, in NVML's units.

Values are written the way the driver reports them (mW, mJ, MHz, %, bytes), so a test
can check the agent's conversion to SI against the file. Unknown keys are errors, so a
typo in a fixture fails loudly instead of silently using a default.

Keys per GPU are the fields of ``GpuSpec``; see tests/fixtures/nvml/*.yaml for examples.
``not_supported`` names NVML symbols (``nvmlDeviceGetPowerUsage``), field ids
(``NVML_FI_DEV_POWER_INSTANT``) or GPM metrics (``NVML_GPM_METRIC_SM_OCCUPANCY``) that
answer NVML_ERROR_NOT_SUPPORTED on that GPU. ``missing_symbols`` (scenario level) are
symbols the driver lacks altogether, like an old driver.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

FIXTURES_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "nvml"


@dataclass(frozen=True)
class ProcessSpec:
    pid: int
    used_memory_bytes: int
    #: what nvmlDeviceGetProcessUtilization reports as smUtil; None: no samples
    sm_util_percent: int | None = None


@dataclass(frozen=True)
class GpmSpec:
    sm_util_percent: float = 0.0
    sm_occupancy_percent: float = 0.0
    any_tensor_util_percent: float = 0.0
    dram_bw_util_percent: float = 0.0
    fp64_util_percent: float = 0.0
    fp32_util_percent: float = 0.0
    fp16_util_percent: float = 0.0


@dataclass(frozen=True)
class XidSpec:
    #: emitted when the GPU's read number ``at_read`` starts (1-based)
    at_read: int
    xid: int


@dataclass(frozen=True)
class MigSpec:
    uuid: str
    profile: str
    gpu_instance_id: int
    memory_total_bytes: int
    memory_used_bytes: int = 0
    gpm: GpmSpec | None = None
    processes: tuple[ProcessSpec, ...] = ()


@dataclass(frozen=True)
class GpuSpec:
    uuid: str
    name: str
    #: "volta", "ampere", "hopper", ... (nvmlDeviceGetArchitecture)
    architecture: str
    pci_bus_id: str
    memory_total_bytes: int
    memory_used_bytes: int = 0
    memory_reserved_bytes: int = 0
    power_limit_milliwatts: int = 700_000
    power_milliwatts: int = 100_000
    energy_start_millijoules: int = 0
    utilization_gpu_percent: int = 0
    utilization_memory_percent: int = 0
    #: nvmlDeviceGetEncoderUtilization / DecoderUtilization (NotSupported in MIG mode)
    encoder_utilization_percent: int = 0
    decoder_utilization_percent: int = 0
    #: GPM metric values; None: GPM not supported (nvmlGpmQueryDeviceSupport says 0)
    gpm: GpmSpec | None = None
    temperature_celsius: int = 40
    memory_temperature_celsius: int = 45
    sm_clock_mhz: int = 1980
    memory_clock_mhz: int = 2619
    throttle_reasons: int = 0
    ecc_corrected: int = 0
    ecc_uncorrected: int = 0
    remapped_correctable: int = 0
    remapped_uncorrectable: int = 0
    remapped_pending: int = 0
    processes: tuple[ProcessSpec, ...] = ()
    xids: tuple[XidSpec, ...] = ()
    not_supported: frozenset[str] = frozenset()
    #: PCIe and NVLink traffic (GPM's unit, MiB/s): GPM answers it, and the byte-counter
    #: fields (PCIe bytes, NVLink KiB) grow by it
    pcie_tx_mib_per_second: float = 0.0
    pcie_rx_mib_per_second: float = 0.0
    nvlink_tx_mib_per_second: float = 0.0
    nvlink_rx_mib_per_second: float = 0.0
    pcie_replays: int = 0
    pcie_link_generation: int = 4
    pcie_link_width: int = 16
    pcie_link_generation_max: int = 4
    pcie_link_width_max: int = 16
    #: nvmlDeviceGetFanSpeed, % (list it in not_supported for a passively cooled board)
    fan_speed_percent: int = 0
    retired_pages_sbe: int = 0
    retired_pages_dbe: int = 0
    retired_pages_pending: int = 0
    #: nvmlDeviceGetDefaultApplicationsClock(NVML_CLOCK_SM), MHz
    sm_clock_default_mhz: int = 1980
    #: MIG instances; non-empty means MIG mode is enabled
    mig: tuple[MigSpec, ...] = ()
    #: the GPU falls off the bus when its read number N starts (a read = one field batch)
    falls_off_bus_at_read: int | None = None
    #: it answers again after this many nvmlInit calls following the fall (None: never)
    recovers_after_inits: int | None = None


@dataclass(frozen=True)
class Scenario:
    gpus: tuple[GpuSpec, ...]
    driver_version: str = "550.54.15"
    #: nvmlSystemGetCudaDriverVersion_v2 form: major * 1000 + minor * 10
    cuda_driver_version: int = 12040
    missing_symbols: frozenset[str] = frozenset()


def load_scenario(path: str | Path) -> Scenario:
    """A scenario from a YAML file; a bare name is looked up in tests/fixtures/nvml."""
    path = Path(path)
    if not path.suffix:
        path = FIXTURES_DIR / f"{path}.yaml"
    elif not path.is_absolute() and not path.exists():
        path = FIXTURES_DIR / path
    data = yaml.safe_load(path.read_text())
    data.pop("templates", None)  # a place for YAML anchors
    return _build(Scenario, data, str(path))


_NESTED: dict[tuple[type, str], type] = {
    (Scenario, "gpus"): GpuSpec,
    (GpuSpec, "processes"): ProcessSpec,
    (GpuSpec, "xids"): XidSpec,
    (GpuSpec, "mig"): MigSpec,
    (GpuSpec, "gpm"): GpmSpec,
    (MigSpec, "gpm"): GpmSpec,
    (MigSpec, "processes"): ProcessSpec,
}


def _build(cls: type, data: dict[str, Any], where: str) -> Any:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a mapping, got {data!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)} for {cls.__name__}")
    values: dict[str, Any] = {}
    for key, value in data.items():
        nested = _NESTED.get((cls, key))
        if nested is not None and isinstance(value, list):
            value = tuple(_build(nested, v, f"{where}.{key}[{i}]") for i, v in enumerate(value))
        elif nested is not None and value is not None:
            value = _build(nested, value, f"{where}.{key}")
        elif key in ("not_supported", "missing_symbols"):
            value = frozenset(value)
        values[key] = value
    return cls(**values)


def with_gpu(scenario: Scenario, index: int, **changes: Any) -> Scenario:
    """A copy of ``scenario`` with GPU ``index`` changed (for one-off test variants)."""
    gpus = list(scenario.gpus)
    gpus[index] = dataclasses.replace(gpus[index], **changes)
    return dataclasses.replace(scenario, gpus=tuple(gpus))
