"""Fake NVML symbols for GPM samples and XID event sets (see nvml_symbols for the rules).

A GPM sample records, per metric, the time integral of the metric's value up to the
sample; nvmlGpmMetricsGet answers the average between two samples, exactly as the
hardware counters do. Samples closer than 100 ms answer zeros, like the real driver.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

import pynvml as N

from tests.fakes.nvml_symbols import (
    NOT_A_MIG_INSTANCE,
    SUCCESS,
    SUPPORTED_EVENTS,
    Fail,
    address_of,
    scalar,
    write_pointer,
)

if TYPE_CHECKING:
    from tests.fakes.nvml_lib import FakeNvml as _Base
else:
    _Base = object

GPM_BASE = 0x6A0000000000
EVENT_SET_BASE = 0x6B0000000000
#: NVML's GPM refresh interval; closer samples read as zeros
GPM_MIN_GAP_SECONDS = 0.1

#: metric id -> GpmSpec field
GPM_METRICS = {
    N.NVML_GPM_METRIC_SM_UTIL: "sm_util_percent",
    N.NVML_GPM_METRIC_SM_OCCUPANCY: "sm_occupancy_percent",
    N.NVML_GPM_METRIC_ANY_TENSOR_UTIL: "any_tensor_util_percent",
    N.NVML_GPM_METRIC_DRAM_BW_UTIL: "dram_bw_util_percent",
    N.NVML_GPM_METRIC_FP64_UTIL: "fp64_util_percent",
    N.NVML_GPM_METRIC_FP32_UTIL: "fp32_util_percent",
    N.NVML_GPM_METRIC_FP16_UTIL: "fp16_util_percent",
}
#: traffic metric id -> GpuSpec field (MiB/s; the physical GPU's, not in GpmSpec)
GPM_TRAFFIC = {
    N.NVML_GPM_METRIC_PCIE_TX_PER_SEC: "pcie_tx_mib_per_second",
    N.NVML_GPM_METRIC_PCIE_RX_PER_SEC: "pcie_rx_mib_per_second",
    N.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: "nvlink_tx_mib_per_second",
    N.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC: "nvlink_rx_mib_per_second",
}


class GpmSymbols(_Base):
    def nvmlGpmQueryDeviceSupport(self, handle: Any, out: Any) -> int:
        gpu, _ = self._device(handle, "nvmlGpmQueryDeviceSupport")
        if out._obj.version != N.NVML_GPM_SUPPORT_VERSION:
            raise Fail(N.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        out._obj.isSupportedDevice = 1 if gpu.spec.gpm is not None else 0
        return SUCCESS

    def nvmlGpmSampleAlloc(self, out: Any) -> int:
        self._next_gpm_sample += 1
        self.gpm_samples[self._next_gpm_sample] = None
        write_pointer(out, GPM_BASE + self._next_gpm_sample)
        return SUCCESS

    def nvmlGpmSampleFree(self, sample: Any) -> int:
        if self.gpm_samples.pop(address_of(sample) - GPM_BASE, False) is False:
            raise Fail(N.NVML_ERROR_INVALID_ARGUMENT)
        return SUCCESS

    def nvmlGpmSampleGet(self, handle: Any, sample: Any) -> int:
        gpu, _ = self._device(handle, "nvmlGpmSampleGet")
        if gpu.spec.gpm is None:
            raise Fail(N.NVML_ERROR_NOT_SUPPORTED)
        self._store_sample(sample, (gpu.index, None))
        return SUCCESS

    def nvmlGpmMigSampleGet(self, handle: Any, instance_id: Any, sample: Any) -> int:
        gpu, mig = self._device(handle, "nvmlGpmMigSampleGet")
        ids = [m.gpu_instance_id for m in gpu.spec.mig]
        if mig is not None or scalar(instance_id) not in ids:
            raise Fail(N.NVML_ERROR_INVALID_ARGUMENT)  # takes the parent handle and a GI id
        if gpu.spec.gpm is None:
            raise Fail(N.NVML_ERROR_NOT_SUPPORTED)
        self._store_sample(sample, (gpu.index, scalar(instance_id)))
        return SUCCESS

    def nvmlGpmMetricsGet(self, request: Any) -> int:
        metrics = request._obj
        if metrics.version != N.NVML_GPM_METRICS_GET_VERSION:
            raise Fail(N.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        first = self.gpm_samples.get(address_of(metrics.sample1) - GPM_BASE)
        second = self.gpm_samples.get(address_of(metrics.sample2) - GPM_BASE)
        if first is None or second is None or first[0] != second[0]:
            raise Fail(N.NVML_ERROR_INVALID_ARGUMENT)
        (gpu_index, _), first_at, first_totals = first
        _, second_at, second_totals = second
        elapsed = second_at - first_at
        asked = tuple(int(metrics.metrics[i].metricId) for i in range(metrics.numMetrics))
        self.gpm_metric_requests.append(asked)
        for slot in range(metrics.numMetrics):
            metric = metrics.metrics[slot]
            metric_id = int(metric.metricId)
            known = metric_id in first_totals and metric_id in second_totals
            if not known or metric_id in self.gpus[gpu_index].unsupported_gpm:
                metric.nvmlReturn = N.NVML_ERROR_NOT_SUPPORTED
                continue
            too_close = elapsed < GPM_MIN_GAP_SECONDS - 1e-9
            delta = second_totals[metric_id] - first_totals[metric_id]
            metric.value = 0.0 if too_close else delta / elapsed
            metric.nvmlReturn = SUCCESS
        return SUCCESS

    def _store_sample(self, sample: Any, key: tuple[int, int | None]) -> None:
        sample_id = address_of(sample) - GPM_BASE
        if sample_id not in self.gpm_samples:
            raise Fail(N.NVML_ERROR_INVALID_ARGUMENT)
        now = self.clock()
        counters = self.gpus[key[0]].gpm_counters[key[1]]
        totals = {metric_id: counter.total(now) for metric_id, counter in counters.items()}
        self.gpm_samples[sample_id] = (key, now, totals)
        self.gpm_sample_times.setdefault(key, []).append(now)


class EventSymbols(_Base):
    def nvmlEventSetCreate(self, out: Any) -> int:
        self._next_event_set += 1
        self.event_sets[self._next_event_set] = ([], set())
        write_pointer(out, EVENT_SET_BASE + self._next_event_set)
        return SUCCESS

    def nvmlEventSetFree(self, event_set: Any) -> int:
        if self.event_sets.pop(address_of(event_set) - EVENT_SET_BASE, None) is None:
            raise Fail(N.NVML_ERROR_INVALID_ARGUMENT)
        return SUCCESS

    def nvmlDeviceGetSupportedEventTypes(self, handle: Any, out: Any) -> int:
        self._device(handle, "nvmlDeviceGetSupportedEventTypes")
        out._obj.value = SUPPORTED_EVENTS
        return SUCCESS

    def nvmlDeviceRegisterEvents(self, handle: Any, types: Any, event_set: Any) -> int:
        gpu, mig = self._device(handle, "nvmlDeviceRegisterEvents")
        entry = self.event_sets.get(address_of(event_set) - EVENT_SET_BASE)
        if entry is None or mig is not None:
            raise Fail(N.NVML_ERROR_INVALID_ARGUMENT)
        if scalar(types) & ~SUPPORTED_EVENTS:
            raise Fail(N.NVML_ERROR_NOT_SUPPORTED)
        entry[1].add(gpu.index)
        return SUCCESS

    def nvmlEventSetWait_v2(self, event_set: Any, out: Any, timeout_ms: Any) -> int:
        entry = self.event_sets.get(address_of(event_set) - EVENT_SET_BASE)
        if entry is None:
            raise Fail(N.NVML_ERROR_INVALID_ARGUMENT)
        pending, devices = entry
        if any(self.gpus[index].lost for index in devices):
            raise Fail(N.NVML_ERROR_GPU_IS_LOST)
        if not pending:
            raise Fail(N.NVML_ERROR_TIMEOUT)  # nothing within the timeout (not slept here)
        gpu_index, xid = pending.pop(0)
        data = out._obj
        write_pointer_field(data, self._handle(gpu_index))
        data.eventType = N.nvmlEventTypeXidCriticalError
        data.eventData = xid
        data.gpuInstanceId = data.computeInstanceId = NOT_A_MIG_INSTANCE
        return SUCCESS


def write_pointer_field(data: Any, address: int) -> None:
    """Set c_nvmlEventData_t.device to a handle address."""
    data.device = ctypes.cast(ctypes.c_void_p(address), N.c_nvmlDevice_t)
