"""Who is there: each GPU's identity, its MIG instances and what it supports.

Handles come from here and live until the next NVML re-initialisation; they are never
carried across one (a handle kept past a GPU reset can crash inside the driver).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pynvml

from agent.model import GpuInfo
from agent.sources.nvml.calls import DeviceCalls, FieldLog
from agent.sources.nvml.structs import memory_v2_query

#: nvmlDeviceArchitecture_t -> name used in GpuInfo.architecture
ARCHITECTURES: dict[int, str] = {
    getattr(pynvml, f"NVML_DEVICE_ARCH_{name.upper()}"): name
    for name in (
        "kepler",
        "maxwell",
        "pascal",
        "volta",
        "turing",
        "ampere",
        "ada",
        "hopper",
        "blackwell",
        "rubin",
    )
    if hasattr(pynvml, f"NVML_DEVICE_ARCH_{name.upper()}")
}


@dataclass(frozen=True)
class SystemInfo:
    """Driver-wide facts (nvidia-smi --query-gpu=driver_version; the CUDA version of its banner)."""

    gpu_count: int
    driver_version: str | None
    cuda_version: str | None


@dataclass(frozen=True)
class MigInstance:
    info: GpuInfo
    handle: Any
    #: the GPU instance id, which GPM and process records use
    gpu_instance_id: int


@dataclass(frozen=True)
class DiscoveredGpu:
    info: GpuInfo
    handle: Any
    calls: DeviceCalls
    gpm_supported: bool
    instances: tuple[MigInstance, ...] = field(default=())

    @property
    def infos(self) -> list[GpuInfo]:
        """The GPU followed by its MIG instances."""
        return [self.info, *(instance.info for instance in self.instances)]


def read_system() -> SystemInfo:
    """Device count and versions; raises NVMLError when NVML cannot count GPUs."""
    count = int(pynvml.nvmlDeviceGetCount())
    try:
        driver: str | None = str(pynvml.nvmlSystemGetDriverVersion())
    except pynvml.NVMLError:
        driver = None
    try:
        cuda = int(pynvml.nvmlSystemGetCudaDriverVersion_v2())
        cuda_version: str | None = f"{cuda // 1000}.{cuda % 1000 // 10}"
    except pynvml.NVMLError:
        cuda_version = None
    return SystemInfo(count, driver, cuda_version)


def discover_gpu(index: int, system: SystemInfo, field_log: FieldLog) -> DiscoveredGpu:
    """A GPU's identity and MIG instances; raises NVMLError when the GPU cannot be named."""
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    uuid = str(pynvml.nvmlDeviceGetUUID(handle))
    calls = DeviceCalls(uuid, field_log)
    mig_mode = calls.get("mig_mode", lambda: pynvml.nvmlDeviceGetMigMode(handle))
    mig_enabled = mig_mode is not None and mig_mode[0] == pynvml.NVML_DEVICE_MIG_ENABLE
    info = GpuInfo(
        uuid=uuid,
        index=index,
        name=str(pynvml.nvmlDeviceGetName(handle)),
        architecture=_architecture(handle, calls),
        memory_total_bytes=_memory_total_bytes(handle, calls),
        pci_bus_id=calls.get("pci_bus_id", lambda: _pci_bus_id(handle)),
        driver_version=system.driver_version,
        cuda_version=system.cuda_version,
        power_limit_watts=_power_limit_watts(handle, calls),
        mig_enabled=mig_enabled,
    )
    instances = _mig_instances(handle, info) if mig_enabled else ()
    return DiscoveredGpu(info, handle, calls, _gpm_supported(handle, calls), instances)


def _architecture(handle: Any, calls: DeviceCalls) -> str | None:
    """ "hopper", "ampere", ...; None for an architecture this agent does not know."""
    code = calls.get("architecture", lambda: pynvml.nvmlDeviceGetArchitecture(handle))
    return None if code is None else ARCHITECTURES.get(int(code))


def _memory_total_bytes(handle: Any, calls: DeviceCalls) -> int | None:
    memory = read_memory(handle, calls)
    return None if memory is None else int(memory.total)


def read_memory(handle: Any, calls: DeviceCalls) -> Any:
    """Memory info v2 (with driver-reserved memory), v1 on drivers before 510.39; bytes.

    nvidia-smi --query-gpu=memory.used,memory.total,memory.reserved. With v1 on newer
    drivers ``used`` includes the reserved memory.
    """
    return calls.get("memory", *memory_queries(handle))


def memory_queries(handle: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The memory info calls for ``handle``, newest first (see read_memory); a reader
    builds them once per session."""
    return (memory_v2_query(handle), functools.partial(pynvml.nvmlDeviceGetMemoryInfo, handle))


def _pci_bus_id(handle: Any) -> str:
    """nvidia-smi --query-gpu=pci.bus_id, e.g. 00000000:18:00.0."""
    bus_id = pynvml.nvmlDeviceGetPciInfo(handle).busId
    return bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)


def _power_limit_watts(handle: Any, calls: DeviceCalls) -> float | None:
    """nvidia-smi --query-gpu=enforced.power.limit, W."""
    milliwatts = calls.get(
        "power_limit_watts", lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle)
    )
    return None if milliwatts is None else int(milliwatts) / 1000


def _gpm_supported(handle: Any, calls: DeviceCalls) -> bool:
    support = calls.get("gpm_support", lambda: pynvml.nvmlGpmQueryDeviceSupport(handle))
    return support is not None and bool(support.isSupportedDevice)


def _mig_instances(handle: Any, parent: GpuInfo) -> tuple[MigInstance, ...]:
    """The MIG devices that exist (nvidia-smi -L); empty slots answer NotFound."""
    instances = []
    for slot in range(int(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle))):
        try:
            mig_handle = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except pynvml.NVMLError_NotFound:
            continue
        instances.append(_mig_instance(mig_handle, parent))
    return tuple(instances)


def _mig_instance(mig_handle: Any, parent: GpuInfo) -> MigInstance:
    uuid = str(pynvml.nvmlDeviceGetUUID(mig_handle))
    # NVML names a MIG device "<parent name> MIG <profile>", e.g. "... MIG 3g.40gb"
    name = str(pynvml.nvmlDeviceGetName(mig_handle))
    profile = name.rsplit(" MIG ", 1)[1] if " MIG " in name else None
    memory = pynvml.nvmlDeviceGetMemoryInfo(mig_handle)
    gpu_instance_id = int(pynvml.nvmlDeviceGetGpuInstanceId(mig_handle))
    info = GpuInfo(
        uuid=uuid,
        index=parent.index,
        name=parent.name,
        architecture=parent.architecture,
        memory_total_bytes=int(memory.total),
        pci_bus_id=parent.pci_bus_id,
        mig_parent_uuid=parent.uuid,
        mig_profile=profile,
        mig_gpu_instance_id=gpu_instance_id,
        driver_version=parent.driver_version,
        cuda_version=parent.cuda_version,
    )
    return MigInstance(info, mig_handle, gpu_instance_id)
