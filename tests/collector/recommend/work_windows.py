"""Hand-built workload windows for the bottleneck verdicts' unit tests."""

from __future__ import annotations

import dataclasses

from collector.analysis.work_window import GpuWindow, HostWindow, WorkloadWindow
from collector.records import WorkloadRef

JOB = WorkloadRef("pod:ml/trainer-1", "kubernetes_pod", "trainer-1", "ml", "vision")
HEALTHY = GpuWindow(
    uuid="GPU-0", node="n1", model="H100", samples=360, unhealthy_samples=0, sm_mean=0.9,
    sm_wobble=0.04, dram_mean=0.5, tensor_mean=0.55, used_share=0.9, pcie_rx_share_mean=0.05,
    pcie_rx_share_burst=0.07, nvlink_bytes_per_second=40e9, throttled_share=0.0,
    clock_ratio=1.0, fault_xid_samples=0, ecc_uncorrected_increase=0,
)  # fmt: skip
IDLE_HOST = HostWindow(samples=30, cpu_used_cores=3.0, cpu_limit_cores=16.0,
                       cpu_throttled_ratio=0.0, memory_pressure_ratio=0.0)  # fmt: skip


def gpu(i: int = 0, **changes: object) -> GpuWindow:
    return dataclasses.replace(HEALTHY, uuid=f"GPU-{i}", **changes)  # type: ignore[arg-type]


def window(
    gpus: list[GpuWindow], host: HostWindow | None = IDLE_HOST, seconds: float = 1800.0
) -> WorkloadWindow:
    return WorkloadWindow(JOB, 1000.0, 1000.0 + seconds, tuple(gpus), host)


def throttled(n: int = 2) -> WorkloadWindow:
    """``n`` H100s busy at 62 % of their clock, power-capped."""
    return window([gpu(i, throttled_share=1.0, clock_ratio=0.62, used_share=0.56)
                   for i in range(n)])  # fmt: skip
