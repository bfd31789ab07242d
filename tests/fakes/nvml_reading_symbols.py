"""Fake NVML symbols for the per-read telemetry: utilisation, power, energy, temperatures,
clocks, throttle reasons, ECC, field values and processes (see nvml_symbols for the rules)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pynvml as N

from tests.fakes.nvml_symbols import NOT_A_MIG_INSTANCE, SUCCESS, Fail, scalar

if TYPE_CHECKING:
    from tests.fakes.nvml_lib import FakeGpu
    from tests.fakes.nvml_lib import FakeNvml as _Base
    from tests.fakes.nvml_scenario import ProcessSpec
else:
    _Base = object

#: field id -> (valueType, union member)
_FIELD_TYPES = {
    N.NVML_FI_DEV_POWER_INSTANT: (N.NVML_VALUE_TYPE_UNSIGNED_INT, "uiVal"),
    N.NVML_FI_DEV_ENERGY: (N.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal"),
    N.NVML_FI_DEV_MEMORY_TEMP: (N.NVML_VALUE_TYPE_UNSIGNED_INT, "uiVal"),
    N.NVML_FI_DEV_ECC_SBE_VOL_TOTAL: (N.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal"),
    N.NVML_FI_DEV_ECC_DBE_VOL_TOTAL: (N.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal"),
    N.NVML_FI_DEV_REMAPPED_COR: (N.NVML_VALUE_TYPE_UNSIGNED_INT, "uiVal"),
    N.NVML_FI_DEV_REMAPPED_UNC: (N.NVML_VALUE_TYPE_UNSIGNED_INT, "uiVal"),
    N.NVML_FI_DEV_REMAPPED_PENDING: (N.NVML_VALUE_TYPE_UNSIGNED_INT, "uiVal"),
    N.NVML_FI_DEV_PCIE_REPLAY_COUNTER: (N.NVML_VALUE_TYPE_UNSIGNED_INT, "uiVal"),
    N.NVML_FI_DEV_PCIE_COUNT_TX_BYTES: (N.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal"),
    N.NVML_FI_DEV_PCIE_COUNT_RX_BYTES: (N.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal"),
    N.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: (N.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal"),
    N.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: (N.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal"),
    N.NVML_FI_DEV_RETIRED_SBE: (N.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal"),
    N.NVML_FI_DEV_RETIRED_DBE: (N.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, "ullVal"),
    N.NVML_FI_DEV_RETIRED_PENDING: (N.NVML_VALUE_TYPE_UNSIGNED_INT, "uiVal"),
}
#: fields that answer only for all NVLinks together here (scopeId UINT_MAX)
_ALL_LINKS_SCOPE = 0xFFFFFFFF
_NVLINK_FIELDS = frozenset(
    {N.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, N.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX}
)
_MIB = 1024 * 1024


def _field_number(gpu: FakeGpu, field_id: int, now: float) -> int:
    spec = gpu.spec
    return {
        N.NVML_FI_DEV_POWER_INSTANT: lambda: gpu.power_milliwatts,
        N.NVML_FI_DEV_ENERGY: lambda: gpu.energy_millijoules(now),
        N.NVML_FI_DEV_MEMORY_TEMP: lambda: spec.memory_temperature_celsius,
        N.NVML_FI_DEV_ECC_SBE_VOL_TOTAL: lambda: spec.ecc_corrected,
        N.NVML_FI_DEV_ECC_DBE_VOL_TOTAL: lambda: spec.ecc_uncorrected,
        N.NVML_FI_DEV_REMAPPED_COR: lambda: spec.remapped_correctable,
        N.NVML_FI_DEV_REMAPPED_UNC: lambda: spec.remapped_uncorrectable,
        N.NVML_FI_DEV_REMAPPED_PENDING: lambda: spec.remapped_pending,
        N.NVML_FI_DEV_PCIE_REPLAY_COUNTER: lambda: spec.pcie_replays,
        # counters: bytes for PCIe, KiB for NVLink, of traffic integrated in MiB
        N.NVML_FI_DEV_PCIE_COUNT_TX_BYTES: lambda: _traffic(gpu, "pcie_tx", now, _MIB),
        N.NVML_FI_DEV_PCIE_COUNT_RX_BYTES: lambda: _traffic(gpu, "pcie_rx", now, _MIB),
        N.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: lambda: _traffic(gpu, "nvlink_tx", now, 1024),
        N.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: lambda: _traffic(gpu, "nvlink_rx", now, 1024),
        N.NVML_FI_DEV_RETIRED_SBE: lambda: spec.retired_pages_sbe,
        N.NVML_FI_DEV_RETIRED_DBE: lambda: spec.retired_pages_dbe,
        N.NVML_FI_DEV_RETIRED_PENDING: lambda: spec.retired_pages_pending,
    }[field_id]()


def _traffic(gpu: FakeGpu, direction: str, now: float, units_per_mib: int) -> int:
    return int(gpu.traffic[f"{direction}_mib_per_second"].total(now) * units_per_mib)


class ReadingSymbols(_Base):
    def nvmlDeviceGetFieldValues(self, handle: Any, count: Any, values: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetFieldValues")
        now = self.clock()
        asked = tuple(int(values._obj[i].fieldId) for i in range(scalar(count)))
        self.field_requests.append((gpu.spec.uuid, asked))
        for index in range(scalar(count)):
            element = values._obj[index]
            element.timestamp = int(now * 1_000_000)
            field_id = int(element.fieldId)
            if field_id not in _FIELD_TYPES or field_id in gpu.unsupported_fields:
                element.nvmlReturn = N.NVML_ERROR_NOT_SUPPORTED
            elif field_id == N.NVML_FI_DEV_POWER_INSTANT and element.scopeId != 0:
                element.nvmlReturn = N.NVML_ERROR_NOT_SUPPORTED  # only GPU scope here
            elif field_id in _NVLINK_FIELDS and element.scopeId != _ALL_LINKS_SCOPE:
                element.nvmlReturn = N.NVML_ERROR_INVALID_ARGUMENT  # per link: not modelled
            else:
                value_type, member = _FIELD_TYPES[field_id]
                element.valueType = value_type
                setattr(element.value, member, _field_number(gpu, field_id, now))
                element.nvmlReturn = SUCCESS
        return SUCCESS

    def nvmlDeviceGetUtilizationRates(self, handle: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetUtilizationRates")
        if gpu.spec.mig:
            raise Fail(N.NVML_ERROR_NOT_SUPPORTED)
        out._obj.gpu = gpu.spec.utilization_gpu_percent
        out._obj.memory = gpu.spec.utilization_memory_percent
        return SUCCESS

    def nvmlDeviceGetPowerUsage(self, handle: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetPowerUsage")
        out._obj.value = gpu.power_milliwatts
        return SUCCESS

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetTotalEnergyConsumption")
        out._obj.value = gpu.energy_millijoules(self.clock())
        return SUCCESS

    def nvmlDeviceGetTemperatureV(self, handle: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetTemperatureV")
        if out._obj.version != N.nvmlTemperature_v1:
            raise Fail(N.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        if out._obj.sensorType != N.NVML_TEMPERATURE_GPU:
            raise Fail(N.NVML_ERROR_INVALID_ARGUMENT)
        out._obj.temperature = gpu.spec.temperature_celsius
        return SUCCESS

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetTemperature")
        if scalar(sensor) != N.NVML_TEMPERATURE_GPU:
            raise Fail(N.NVML_ERROR_INVALID_ARGUMENT)
        out._obj.value = gpu.spec.temperature_celsius
        return SUCCESS

    def nvmlDeviceGetClockInfo(self, handle: Any, clock: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetClockInfo")
        kind = scalar(clock)
        if kind == N.NVML_CLOCK_MEM:
            out._obj.value = gpu.spec.memory_clock_mhz
        elif kind in (N.NVML_CLOCK_SM, N.NVML_CLOCK_GRAPHICS):
            out._obj.value = gpu.spec.sm_clock_mhz
        else:
            raise Fail(N.NVML_ERROR_INVALID_ARGUMENT)
        return SUCCESS

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetCurrentClocksEventReasons")
        out._obj.value = gpu.spec.throttle_reasons
        return SUCCESS

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetCurrentClocksThrottleReasons")
        out._obj.value = gpu.spec.throttle_reasons
        return SUCCESS

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, kind: Any, counter: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetTotalEccErrors")
        if scalar(counter) != N.NVML_VOLATILE_ECC:
            raise Fail(N.NVML_ERROR_NOT_SUPPORTED)  # only volatile counts modelled
        corrected = scalar(kind) == N.NVML_MEMORY_ERROR_TYPE_CORRECTED
        out._obj.value = gpu.spec.ecc_corrected if corrected else gpu.spec.ecc_uncorrected
        return SUCCESS

    def nvmlDeviceGetRemappedRows(
        self, handle: Any, corrected: Any, uncorrected: Any, pending: Any, failure: Any
    ) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetRemappedRows")
        corrected._obj.value = gpu.spec.remapped_correctable
        uncorrected._obj.value = gpu.spec.remapped_uncorrectable
        pending._obj.value = gpu.spec.remapped_pending
        failure._obj.value = 0
        return SUCCESS

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle: Any, count: Any, infos: Any) -> int:
        return self._processes(handle, count, infos, "nvmlDeviceGetComputeRunningProcesses_v3")

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: Any, count: Any, infos: Any) -> int:
        return self._processes(handle, count, infos, "nvmlDeviceGetComputeRunningProcesses_v2")

    def _processes(self, handle: Any, count: Any, infos: Any, symbol: str) -> int:
        gpu, mig = self._device(handle, symbol)
        rows: list[tuple[ProcessSpec, int]]
        if mig is not None or gpu.spec.mig:
            # a MIG handle lists its own; the parent the aggregate (with privileges)
            migs = [mig] if mig else list(gpu.spec.mig)
            rows = [(p, m.gpu_instance_id) for m in migs for p in m.processes]
        else:
            rows = [(p, NOT_A_MIG_INSTANCE) for p in gpu.spec.processes]
        if infos is None or count._obj.value < len(rows):
            count._obj.value = len(rows)
            return N.NVML_ERROR_INSUFFICIENT_SIZE if rows else SUCCESS
        for slot, (process, instance_id) in enumerate(rows):
            infos[slot].pid = process.pid
            infos[slot].usedGpuMemory = process.used_memory_bytes
            infos[slot].gpuInstanceId = instance_id
            infos[slot].computeInstanceId = instance_id
        count._obj.value = len(rows)
        return SUCCESS

    def nvmlDeviceGetProcessUtilization(
        self, handle: Any, samples: Any, count: Any, last_seen: Any
    ) -> int:
        gpu, _ = self._device(handle, "nvmlDeviceGetProcessUtilization")
        if gpu.spec.mig:
            raise Fail(N.NVML_ERROR_NOT_SUPPORTED)
        now_microseconds = int(self.clock() * 1_000_000)
        active = [p for p in gpu.spec.processes if p.sm_util_percent is not None]
        if not active or now_microseconds <= scalar(last_seen):
            raise Fail(N.NVML_ERROR_NOT_FOUND)  # no sample newer than last_seen
        if samples is None or count._obj.value < len(active):
            count._obj.value = len(active)
            return N.NVML_ERROR_INSUFFICIENT_SIZE
        for slot, process in enumerate(active):
            samples[slot].pid = process.pid
            samples[slot].timeStamp = now_microseconds
            samples[slot].smUtil = process.sm_util_percent
        count._obj.value = len(active)
        return SUCCESS
