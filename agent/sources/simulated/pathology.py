"""The bottleneck signals of a simulated GPU and its job's host (issue 24), segment by segment.

Beside SM and DRAM activity (workloads.py), each job kind leaves its mark on the other
signals a real GPU shows: PCIe and NVLink traffic, the tensor and FP pipes, clocks and
throttle reasons, XIDs and ECC, and, on the host, CPU against the job's cgroup limit. Every
value is a pure function of (job, GPU, segment), like the activity, so any instant can be
read without replaying. The figures are plausible, not measured: they follow the shapes
../shared/research/nvml.md describes (bytes per second, ratios 0..1, NVML reason bits).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.model import WorkloadHostSample
from agent.sources.simulated.hardware import GpuModel
from agent.sources.simulated.workloads import ActivityKind, SimJob, unit

#: PCIe bytes per second per lane and direction, by generation (after encoding)
PCIE_LANE_BYTES_PER_SECOND = {1: 0.25e9, 2: 0.5e9, 3: 0.985e9, 4: 1.969e9, 5: 3.938e9}
#: (generation, width) of each architecture's host link
_PCIE_LINK = {"hopper": (5, 16), "blackwell": (5, 16), "ampere": (4, 16), "ada": (4, 16)}
#: GPUs built as SXM boards talk NVLink; the PCIe cards (L40S, L4, T4) have none
_NVLINK_ARCHITECTURES = ("ampere", "hopper", "blackwell")
_SW_POWER_CAP, _HW_SLOWDOWN, _SW_THERMAL, _HW_THERMAL = 0x4, 0x8, 0x20, 0x40
#: a fault repeats its XID every this many segments (double-bit ECC, then row remapping)
_FAULT_XID_EVERY_SEGMENTS = 6


@dataclass(frozen=True)
class Signals:
    """The GpuSample fields beyond activity, power and memory, for one GPU and segment."""

    pcie_tx_bytes_per_second: float
    pcie_rx_bytes_per_second: float
    nvlink_tx_bytes_per_second: float | None
    nvlink_rx_bytes_per_second: float | None
    tensor_activity: float
    fp32_activity: float
    fp16_activity: float
    clock_ratio: float
    throttle_reasons: int
    xid_errors: tuple[int, ...] = ()
    ecc_uncorrected_total: int = 0
    pcie_link_generation: int = 0
    pcie_link_width: int = 0


def pcie_link(model: GpuModel) -> tuple[int, int]:
    """The board's (maximum generation, maximum width)."""
    return _PCIE_LINK.get(model.architecture, (3, 16))


def has_nvlink(model: GpuModel) -> bool:
    return model.architecture in _NVLINK_ARCHITECTURES


def gpu_signals(
    job: SimJob | None, model: GpuModel, gpu_key: int, segment: int, sm: float, lagging: bool
) -> Signals:
    """The signals of a GPU running ``job`` (None: free) at SM activity ``sm``."""
    generation, width = pcie_link(model)
    link = PCIE_LANE_BYTES_PER_SECOND[generation] * width
    kind = job.kind if job else None
    u, v = unit(gpu_key ^ 0xA5, segment), unit(gpu_key ^ 0x3C, segment)
    rx = link * _pcie_rx_share(job, segment, u)
    nvlink = _nvlink_bytes_per_second(job, model, u) if has_nvlink(model) else None
    tensor = 0.005 * v if kind is ActivityKind.NO_TENSOR else 0.6 * sm
    fp32 = (0.7 if kind is ActivityKind.NO_TENSOR else 0.1) * sm
    clock, reasons = _clock(kind, lagging, sm)
    xids, ecc = _fault(job, segment)
    return Signals(
        pcie_tx_bytes_per_second=rx / 4.0,
        pcie_rx_bytes_per_second=rx,
        nvlink_tx_bytes_per_second=nvlink,
        nvlink_rx_bytes_per_second=nvlink,
        tensor_activity=tensor,
        fp32_activity=fp32,
        fp16_activity=0.5 * tensor,
        clock_ratio=clock,
        throttle_reasons=reasons,
        xid_errors=xids,
        ecc_uncorrected_total=ecc,
        # an idle board drops its link to generation 1 to save power (nvml.md 3.4)
        pcie_link_generation=generation if sm > 0.0 else 1,
        pcie_link_width=width,
    )


def _pcie_rx_share(job: SimJob | None, segment: int, u: float) -> float:
    """Host-to-GPU traffic as a share of the link: a data-loader-bound job bursts at the
    start of each sawtooth period (the batch arrives), everything else trickles."""
    if job is None:
        return 0.0
    pattern = job.pattern
    if job.kind is ActivityKind.DATALOADER_BOUND:
        position = (segment + pattern.phase_segments) % pattern.period_segments
        return 0.60 + 0.25 * u if position < 2 else 0.04 + 0.04 * u
    return 0.02 + 0.05 * u


def _nvlink_bytes_per_second(job: SimJob | None, model: GpuModel, u: float) -> float:
    """Per direction: a multi-GPU job exchanges gradients over NVLink; a
    communication-bound one keeps the links near their limit, in step on every GPU."""
    if job is None or len(job.gpu_indexes) < 2:
        return 0.0
    if job.kind is ActivityKind.COMM_BOUND:
        return (150e9 if model.architecture != "ampere" else 100e9) * (1.0 + 0.2 * u)
    return 10e9 + 15e9 * u


def _clock(kind: ActivityKind | None, lagging: bool, sm: float) -> tuple[float, int]:
    """(SM clock / default clock, throttle reason bits) while busy; idle is decided by
    the caller (it lowers the clock and sets gpu_idle)."""
    if kind is ActivityKind.THROTTLED:
        return 0.62, _SW_POWER_CAP | _HW_SLOWDOWN
    if kind is ActivityKind.STRAGGLER and lagging:
        return 0.65, _SW_THERMAL | _HW_THERMAL
    return 1.0, 0


def _fault(job: SimJob | None, segment: int) -> tuple[tuple[int, ...], int]:
    """A faulted GPU's XIDs in this segment and its uncorrected ECC count so far."""
    if job is None or job.kind is not ActivityKind.FAULTED:
        return (), 0
    count = max(0, segment // _FAULT_XID_EVERY_SEGMENTS)
    xids = (48, 63) if segment % _FAULT_XID_EVERY_SEGMENTS == 0 else ()
    return xids, count


def falls_off_bus(job: SimJob | None) -> bool:
    """Half the faulted jobs' GPUs are gone from the bus (NVML answers GPU_IS_LOST)."""
    return job is not None and job.kind is ActivityKind.FAULTED and job.pattern.key % 2 == 1


#: (CPU limit cores per GPU, used share of the limit low, span, throttled ratio) by kind
_HOST = {
    ActivityKind.DATALOADER_BOUND: (4.0, 0.97, 0.03, 0.25),
    ActivityKind.HOST_CPU_BOUND: (2.0, 0.98, 0.02, 0.85),
}
_HOST_DEFAULT = (8.0, 0.25, 0.25, 0.0)


def host_sample(job: SimJob, segment: int, timestamp: float) -> WorkloadHostSample:
    """``job``'s use of its host: CPU cores against its cgroup's limit, memory."""
    per_gpu, low, span, throttled = _HOST.get(job.kind, _HOST_DEFAULT)
    gpus = len(job.gpu_indexes)
    # a data-loader-bound job gets 4 cores whatever its size: that is its problem
    limit = per_gpu if job.kind in _HOST else per_gpu * gpus
    u = unit(job.pattern.key ^ 0x77, segment)
    memory_limit = 64 * 2**30 * gpus
    return WorkloadHostSample(
        timestamp=timestamp,
        workload_key=job.workload.key,
        cpu_used_cores=round(limit * (low + span * u), 3),
        cpu_limit_cores=limit,
        cpu_throttled_ratio=throttled,
        memory_pressure_ratio=0.01 * u,
        memory_used_bytes=int(memory_limit * (0.3 + 0.1 * u)),
        memory_limit_bytes=memory_limit,
    )
