"""The fake NVML C symbols: each takes the ctypes arguments nvidia-ml-py passes and fills them.

Signatures follow nvml.h (and how pynvml.py calls them): outputs arrive as ``byref(x)``
(a CArgObject whose ``_obj`` is ``x``), strings as ``create_string_buffer`` arrays,
handles as ctypes pointers. Each returns an NVML return code. The quirks of real NVML that
the agent must cope with are kept: NotSupported on MIG handles and on MIG-enabled parents
for utilisation, NotFound for empty MIG slots and for "no new process samples", the
two-call INSUFFICIENT_SIZE protocol, per-element return codes in field values and GPM,
struct version checks, and zeros from GPM samples closer than 100 ms.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

import pynvml as N

if TYPE_CHECKING:
    from tests.fakes.nvml_lib import FakeNvml as _Base
else:
    _Base = object

SUCCESS = N.NVML_SUCCESS
NOT_A_MIG_INSTANCE = 0xFFFFFFFF
SUPPORTED_EVENTS = (
    N.nvmlEventTypeSingleBitEccError
    | N.nvmlEventTypeDoubleBitEccError
    | N.nvmlEventTypePState
    | N.nvmlEventTypeXidCriticalError
)
#: symbols a MIG device handle answers; everything else is NotSupported on it
MIG_HANDLE_SYMBOLS = frozenset(
    {
        "nvmlDeviceGetUUID",
        "nvmlDeviceGetName",
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetGpuInstanceId",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetComputeRunningProcesses_v2",
        "nvmlDeviceGetArchitecture",
    }
)


class Fail(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def write_pointer(out: Any, address: int) -> None:
    """Store ``address`` in the pointer object behind ``byref(pointer)``."""
    ctypes.cast(ctypes.pointer(out._obj), ctypes.POINTER(ctypes.c_void_p))[0] = address


def address_of(pointer: Any) -> int:
    return ctypes.cast(pointer, ctypes.c_void_p).value or 0


def scalar(value: Any) -> int:
    return int(value.value) if hasattr(value, "value") else int(value)


class SystemSymbols(_Base):
    def nvmlInitWithFlags(self, flags: Any) -> int:
        self._init()
        return SUCCESS

    def nvmlInit_v2(self) -> int:
        self._init()
        return SUCCESS

    def nvmlShutdown(self) -> int:
        self._shutdown()
        return SUCCESS

    def nvmlErrorString(self, code: Any) -> bytes:
        return f"NVML error {scalar(code)}".encode()

    def nvmlSystemGetDriverVersion(self, buffer: Any, size: Any) -> int:
        buffer.value = self.scenario.driver_version.encode()
        return SUCCESS

    def nvmlSystemGetCudaDriverVersion_v2(self, out: Any) -> int:
        out._obj.value = self.scenario.cuda_driver_version
        return SUCCESS

    def nvmlSystemGetCudaDriverVersion(self, out: Any) -> int:
        return self.nvmlSystemGetCudaDriverVersion_v2(out)

    def nvmlDeviceGetCount_v2(self, out: Any) -> int:
        out._obj.value = len(self.gpus)
        return SUCCESS

    def nvmlDeviceGetHandleByIndex_v2(self, index: Any, out: Any) -> int:
        position = scalar(index)
        if position >= len(self.gpus):
            raise Fail(N.NVML_ERROR_INVALID_ARGUMENT)
        if self.gpus[position].lost:
            raise Fail(N.NVML_ERROR_GPU_IS_LOST)
        write_pointer(out, self._handle(position))
        return SUCCESS


class IdentitySymbols(_Base):
    def nvmlDeviceGetUUID(self, handle: Any, buffer: Any, size: Any) -> int:
        gpu, mig = self._device(handle, "nvmlDeviceGetUUID")
        buffer.value = (mig.uuid if mig else gpu.spec.uuid).encode()
        return SUCCESS

    def nvmlDeviceGetName(self, handle: Any, buffer: Any, size: Any) -> int:
        gpu, mig = self._device(handle, "nvmlDeviceGetName")
        name = f"{gpu.spec.name} MIG {mig.profile}" if mig else gpu.spec.name
        buffer.value = name.encode()
        return SUCCESS

    def nvmlDeviceGetPciInfo_v3(self, handle: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetPciInfo_v3")
        bus_id = gpu.spec.pci_bus_id.encode()
        out._obj.busId = bus_id
        out._obj.busIdLegacy = bus_id[4:]
        return SUCCESS

    def nvmlDeviceGetArchitecture(self, handle: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetArchitecture")
        out._obj.value = getattr(N, f"NVML_DEVICE_ARCH_{gpu.spec.architecture.upper()}")
        return SUCCESS

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetEnforcedPowerLimit")
        out._obj.value = gpu.spec.power_limit_milliwatts
        return SUCCESS

    def nvmlDeviceGetMigMode(self, handle: Any, current: Any, pending: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetMigMode")
        if gpu.spec.architecture not in ("ampere", "hopper", "blackwell"):
            raise Fail(N.NVML_ERROR_NOT_SUPPORTED)
        current._obj.value = pending._obj.value = 1 if gpu.spec.mig else 0
        return SUCCESS

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetMaxMigDeviceCount")
        out._obj.value = 7 if gpu.spec.mig else 0
        return SUCCESS

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, index: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetMigDeviceHandleByIndex")
        slot = scalar(index)
        if not gpu.spec.mig:
            raise Fail(N.NVML_ERROR_INVALID_ARGUMENT)
        if slot >= len(gpu.spec.mig):
            raise Fail(N.NVML_ERROR_NOT_FOUND)  # an empty slot
        write_pointer(out, self._handle(gpu.index, slot))
        return SUCCESS

    def nvmlDeviceGetGpuInstanceId(self, handle: Any, out: Any) -> int:
        _, mig = self._device(handle, "nvmlDeviceGetGpuInstanceId")
        if mig is None:
            raise Fail(N.NVML_ERROR_INVALID_ARGUMENT)
        out._obj.value = mig.gpu_instance_id
        return SUCCESS

    def nvmlDeviceGetMemoryInfo(self, handle: Any, out: Any) -> int:
        gpu, mig = self._device(handle, "nvmlDeviceGetMemoryInfo")
        spec = mig or gpu.spec
        reserved = 0 if mig else gpu.spec.memory_reserved_bytes
        # v1 "used" includes the driver-reserved memory on drivers >= 510.39
        out._obj.total = spec.memory_total_bytes
        out._obj.used = spec.memory_used_bytes + reserved
        out._obj.free = spec.memory_total_bytes - spec.memory_used_bytes - reserved
        return SUCCESS

    def nvmlDeviceGetMemoryInfo_v2(self, handle: Any, out: Any) -> int:
        gpu, mig = self._device(handle, "nvmlDeviceGetMemoryInfo_v2")
        if out._obj.version != N.nvmlMemory_v2:
            raise Fail(N.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        spec = mig or gpu.spec
        reserved = 0 if mig else gpu.spec.memory_reserved_bytes
        out._obj.total = spec.memory_total_bytes
        out._obj.reserved = reserved
        out._obj.used = spec.memory_used_bytes
        out._obj.free = spec.memory_total_bytes - spec.memory_used_bytes - reserved
        return SUCCESS
