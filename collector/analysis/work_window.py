"""What the bottleneck verdicts read: one workload's GPUs and host over a recent window.

Plain summaries (means and counts over the window), built by collector/fleet/windows.py as
samples are buffered and read by collector/analysis/bottleneck.py. Ratios are 0..1; rates in
bytes per second; ``None`` where no GPU of the window could say (never 0 for unknown).
"""

from __future__ import annotations

from dataclasses import dataclass

from collector.records import WorkloadRef


@dataclass(frozen=True, slots=True)
class GpuWindow:
    """One GPU as its holder used it over the window."""

    uuid: str
    node: str
    model: str
    samples: int
    #: samples where the GPU was lost (healthy=False) or could not say its activity
    unhealthy_samples: int
    sm_mean: float | None
    #: mean within-minute standard deviation of SM activity: a saw-toothing GPU (filled,
    #: then starved, by its data loader) has a large one, a steadily busy GPU a small one
    sm_wobble: float | None
    dram_mean: float | None
    tensor_mean: float | None
    #: mean of SM activity x (SM clock / default clock), unknown and lost samples as 0:
    #: how much of the GPU the holder got
    used_share: float
    #: host-to-GPU PCIe traffic as a share of the link's maximum: mean, and the mean of
    #: each minute's highest reading (a data loader's bursts)
    pcie_rx_share_mean: float | None
    pcie_rx_share_burst: float | None
    #: NVLink TX + RX
    nvlink_bytes_per_second: float | None
    #: share of busy samples with a power or thermal throttle reason set
    throttled_share: float
    #: mean SM clock / default clock while busy
    clock_ratio: float | None
    #: samples with a hardware XID (ECC, row remapping, fallen off the bus, ...)
    fault_xid_samples: int
    #: growth of the uncorrected ECC counter over the window
    ecc_uncorrected_increase: int
    #: samples with row remaps pending (an uncorrectable error waiting for a GPU reset)
    remap_pending_samples: int = 0
    #: the hardware XID codes seen over the window (48, 79, ...)
    fault_xids: tuple[int, ...] = ()

    @property
    def lost_share(self) -> float:
        return self.unhealthy_samples / self.samples if self.samples else 0.0


@dataclass(frozen=True, slots=True)
class HostWindow:
    """The workload's host CPU against its cgroup limit, over the window."""

    samples: int
    cpu_used_cores: float
    #: None: no limit (cpu.max "max") or unknown
    cpu_limit_cores: float | None
    cpu_throttled_ratio: float | None
    memory_pressure_ratio: float | None

    @property
    def cpu_share_of_limit(self) -> float | None:
        if not self.cpu_limit_cores:
            return None
        return self.cpu_used_cores / self.cpu_limit_cores


@dataclass(frozen=True, slots=True)
class WorkloadWindow:
    """A workload's GPUs (in uuid order) and host over [start, end] (event time)."""

    workload: WorkloadRef
    start: float
    end: float
    gpus: tuple[GpuWindow, ...]
    host: HostWindow | None = None

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)
