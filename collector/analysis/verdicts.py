"""The nouns of the bottleneck verdicts (issue 24): causes, their thresholds, a verdict.

A verdict names the likely reason a busy-looking workload leaves most of its GPUs unused,
with the figures behind it and the money it accounts for. Thresholds are defaults drawn
from the signals' physical ranges (../shared/research/nvml.md); a deployment may tune
them through ``BottleneckPolicy``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Cause(enum.StrEnum):
    INPUT_BOUND = "input_bound"
    HOST_CPU_BOUND = "host_cpu_bound"
    COMMUNICATION_BOUND = "communication_bound"
    MEMORY_BANDWIDTH_BOUND = "memory_bandwidth_bound"
    THROTTLED = "throttled"
    NO_TENSOR_CORES = "no_tensor_cores"
    STRAGGLER = "straggler"
    GPU_FAULT = "gpu_fault"


#: what to try, one clause per cause (English; chat's phrases.py has the translations)
ADVICE: dict[Cause, str] = {
    Cause.INPUT_BOUND: "try more data-loader workers or CPU",
    Cause.HOST_CPU_BOUND: "raise the job's CPU limit",
    Cause.COMMUNICATION_BOUND: "overlap communication with compute or use fewer, larger GPUs",
    Cause.MEMORY_BANDWIDTH_BOUND: "fuse kernels or use larger batches",
    Cause.THROTTLED: "check the GPU's cooling and power cap",
    Cause.NO_TENSOR_CORES: "enable mixed precision (BF16/FP16 or TF32)",
    Cause.STRAGGLER: "move the job off the slow GPU or fix its cooling",
    Cause.GPU_FAULT: "drain the node and have the GPU checked",
}

#: XIDs that mean the hardware, not the program: double-bit ECC (48), row remapping
#: (63, 64), NVLink (74), fallen off the bus (79), uncontained and contained ECC (94, 95),
#: GSP errors (119, 120); 13/31/43 are a program's own faults and are left out
HARDWARE_XIDS = frozenset({48, 63, 64, 74, 79, 92, 94, 95, 119, 120})

#: NVML clocks-event reasons that hold a busy GPU back: SW power cap, HW slowdown, SW and
#: HW thermal slowdown, HW power brake (agent/model.py THROTTLE_REASONS)
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


@dataclass(frozen=True)
class BottleneckPolicy:
    """The verdicts' thresholds; ratios 0..1."""

    #: a window shorter than this says nothing yet
    min_window_seconds: float = 600.0
    #: a workload whose GPUs average less SM activity is idle (release_idle's matter)
    busy_sm: float = 0.05
    #: input-, CPU-, communication- and memory-bound need mean SM activity below this
    low_sm: float = 0.6
    #: host CPU at its limit: used cores at least this share of the cgroup's limit
    cpu_at_limit: float = 0.9
    #: a data loader's bursts: each minute's highest PCIe RX at this share of the link
    pcie_burst: float = 0.5
    #: a saw-tooth: within-minute SM wobble at this share of the mean
    sawtooth: float = 0.15
    #: NVLink TX + RX per GPU that counts as busy, on every GPU of the job (in step)
    nvlink_busy_bytes_per_second: float = 100e9
    dram_high: float = 0.6
    #: memory-bound: DRAM activity at least this far above SM activity
    dram_over_sm: float = 0.2
    #: throttled: this share of busy samples with a power/thermal reason, clocks below
    #: ``clock_low`` of the default
    throttled_share: float = 0.5
    clock_low: float = 0.9
    #: no tensor-core use: SM at least ``tensor_busy_sm`` and tensor pipes below ``tensor_low``
    tensor_busy_sm: float = 0.3
    tensor_low: float = 0.05
    #: a straggler's SM activity this far below its peers' median, or throttled alone
    straggler_gap: float = 0.2
    #: peers wait: their SM activity below this
    peers_waiting_sm: float = 0.8
    #: a GPU lost (healthy=False) for this share of the window is faulted
    lost_share: float = 0.5


@dataclass(frozen=True)
class Verdict:
    """One likely cause; ``money_per_hour`` is its part of the workload's unused share."""

    cause: Cause
    #: one clause of English stating the evidence ("host CPU at 100 % of its 4-core limit")
    reason: str
    #: the figures behind it (JSON-ready)
    evidence: dict[str, object] = field(default_factory=dict)
    #: the GPUs it is about (a straggler, a faulted GPU); empty: the whole workload
    gpu_uuids: tuple[str, ...] = ()
    money_per_hour: float = 0.0

    @property
    def advice(self) -> str:
        return ADVICE[self.cause]
