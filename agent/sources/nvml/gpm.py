"""GPU Performance Monitoring (GPM, Hopper and newer): SM, tensor, FP pipe and HBM activity,
and PCIe and NVLink traffic.

A GPM metric is the average between two samples taken at least 100 ms apart (NVML's
internal refresh; closer samples read as zeros). The sampler keeps its previous sample,
so a read needs one new sample when the previous one is old enough, and otherwise waits
out the rest of the gap first; the very first read takes two samples. Two sample buffers
are allocated once and swapped, never one per read (that would leak driver memory).

Concurrent GPM calls on one GPU have faulted inside the driver, so every call holds the
physical GPU's lock; a MIG instance samples through its parent's handle and lock.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import pynvml

from agent.sources.nvml.calls import DeviceCalls
from agent.sources.nvml.structs import GpmMetricsGet

#: NVML's minimum spacing between the two samples of a metric
MIN_GAP_SECONDS = 0.1

#: only the metrics the agent reports (asking for all is rejected by some headers)
METRIC_IDS: dict[str, int] = {
    "sm_activity": pynvml.NVML_GPM_METRIC_SM_UTIL,
    "sm_occupancy": pynvml.NVML_GPM_METRIC_SM_OCCUPANCY,
    "tensor_activity": pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
    "dram_activity": pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL,
    "fp64_activity": pynvml.NVML_GPM_METRIC_FP64_UTIL,
    "fp32_activity": pynvml.NVML_GPM_METRIC_FP32_UTIL,
    "fp16_activity": pynvml.NVML_GPM_METRIC_FP16_UTIL,
    "pcie_tx_bytes_per_second": pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC,
    "pcie_rx_bytes_per_second": pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC,
    "nvlink_tx_bytes_per_second": pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC,
    "nvlink_rx_bytes_per_second": pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
}
#: the traffic metrics, which NVML answers in MiB/s (the others are percentages)
_TRAFFIC = frozenset(name for name in METRIC_IDS if name.endswith("_bytes_per_second"))
_MIB = 1024 * 1024
#: what a MIG instance asks for: its own engines' activity; PCIe and NVLink traffic is the
#: physical GPU's and is read there once (never split or repeated per instance)
INSTANCE_METRICS = tuple(name for name in METRIC_IDS if name not in _TRAFFIC)


class GpmReadings(NamedTuple):
    """Averages since the previous read; None where a metric failed or was not asked for.

    No nvidia-smi query shows these; ``nvidia-smi dmon --gpm-metrics 2,3,5,10,11,12,13,20,
    21,60,61`` prints them (percent, MiB/s), and DCGM calls them PROF_SM_ACTIVE,
    PROF_SM_OCCUPANCY, PROF_PIPE_TENSOR_ACTIVE, PROF_DRAM_ACTIVE, PROF_PIPE_FP64/FP32/
    FP16_ACTIVE, PROF_PCIE_TX/RX_BYTES and PROF_NVLINK_TX/RX_BYTES.
    """

    #: ratios 0..1
    sm_activity: float | None = None
    sm_occupancy: float | None = None
    tensor_activity: float | None = None
    dram_activity: float | None = None
    fp64_activity: float | None = None
    fp32_activity: float | None = None
    fp16_activity: float | None = None
    #: bytes per second, headers and payload (all NVLinks together)
    pcie_tx_bytes_per_second: float | None = None
    pcie_rx_bytes_per_second: float | None = None
    nvlink_tx_bytes_per_second: float | None = None
    nvlink_rx_bytes_per_second: float | None = None


if tuple(METRIC_IDS) != GpmReadings._fields:  # GpmSampler builds readings positionally
    raise ImportError("gpm.METRIC_IDS and GpmReadings list the metrics in different orders")


class _Metric(NamedTuple):
    """One asked metric: its GpmReadings slot, its log name, its factor from NVML units."""

    slot: int
    name: str
    scale: float
    ratio: bool


class GpmSampler:
    """GPM for one GPU or one MIG GPU instance."""

    def __init__(
        self,
        take_sample: Callable[[Any], object],
        calls: DeviceCalls,
        lock: threading.Lock,
        gap_seconds: float,
        monotonic: Callable[[], float],
        sleep: Callable[[float], None],
        metrics: tuple[str, ...] = tuple(METRIC_IDS),
    ) -> None:
        self._take_sample = take_sample
        self._calls = calls
        self._lock = lock
        self._gap_seconds = max(gap_seconds, MIN_GAP_SECONDS)
        self._monotonic = monotonic
        self._sleep = sleep
        self._buffers: list[Any] = []
        self._previous_at: float | None = None
        self._metrics_asked = tuple(_metric(name) for name in metrics)
        self._request = _metrics_request(metrics)
        self._get_metrics = functools.partial(pynvml.nvmlGpmMetricsGet, self._request)
        #: per buffer, the call that fills it (bound once: the buffers live until close)
        self._fill: list[Callable[[], object]] = []

    def read(self) -> GpmReadings | None:
        """Metrics since the previous read; None when GPM failed (see DeviceCalls)."""
        with self._lock:
            if not self._buffers and not self._allocate():
                return None
            if not self._sample_after_gap():
                return None
            readings = self._metrics(previous=self._buffers[0], current=self._buffers[1])
            self._buffers.reverse()
            self._fill.reverse()
            return readings

    def close(self) -> None:
        """Free the sample buffers (host memory held by the driver library)."""
        with self._lock:
            for buffer in self._buffers:
                self._calls.get("gpm_free", functools.partial(pynvml.nvmlGpmSampleFree, buffer))
            self._buffers, self._fill = [], []
            self._previous_at = None

    def _allocate(self) -> bool:
        for _ in range(2):
            buffer = self._calls.get("gpm", pynvml.nvmlGpmSampleAlloc)
            if buffer is None:
                return False
            self._buffers.append(buffer)
            self._fill.append(functools.partial(self._take_sample, buffer))
        return True

    def _sample_after_gap(self) -> bool:
        """Fill buffers[1] at least one gap after buffers[0] was filled."""
        if self._previous_at is None:
            if not self._take(0):
                return False
            self._previous_at = self._monotonic()
        wait_seconds = self._previous_at + self._gap_seconds - self._monotonic()
        if wait_seconds > 0:
            self._sleep(wait_seconds)
        if not self._take(1):
            self._previous_at = None
            return False
        self._previous_at = self._monotonic()
        return True

    def _take(self, slot: int) -> bool:
        """Fill buffers[slot] with a sample taken now."""
        return self._calls.get("gpm", self._fill[slot]) is not None

    def _metrics(self, previous: Any, current: Any) -> GpmReadings | None:
        request = self._request
        request.sample1 = previous
        request.sample2 = current
        if self._calls.get("gpm", self._get_metrics) is None:
            return None
        values: list[float | None] = [None] * len(GpmReadings._fields)
        for asked, metric in zip(self._metrics_asked, request.metrics, strict=False):
            if metric.nvmlReturn != pynvml.NVML_SUCCESS:
                self._calls.failed(f"gpm_{asked.name}", metric.nvmlReturn)
            elif asked.ratio:
                values[asked.slot] = min(max(metric.value / 100, 0.0), 1.0)
            else:
                values[asked.slot] = max(metric.value * asked.scale, 0.0)
        return GpmReadings._make(values)  # slots are GpmReadings' field order


def _metric(name: str) -> _Metric:
    traffic = name in _TRAFFIC
    return _Metric(GpmReadings._fields.index(name), name, _MIB if traffic else 1, not traffic)


def _metrics_request(metrics: tuple[str, ...]) -> Any:
    """A metrics request for ``metrics``, written once: NVML reads the version, the count
    and the ids, and writes only each metric's return code, value and description."""
    request = GpmMetricsGet()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = len(metrics)
    for slot, name in enumerate(metrics):
        request.metrics[slot].metricId = METRIC_IDS[name]
    return request
