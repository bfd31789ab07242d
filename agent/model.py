"""The wire contract between agent and collector.

Every value is in SI base units (seconds, bytes, watts, joules, hertz, ratios 0..1).
``None`` means "this GPU cannot say" (not supported, or the read failed); it is never
replaced by 0. The structs are msgspec Structs so the agent encodes and the collector
decodes and validates the same definitions. ``SCHEMA_VERSION`` changes whenever a field
changes meaning; adding an optional field with a default does not change it.

The structs the collector decodes by the thousand are ``gc=False`` (the cyclic GC never
scans them: ~1 us less per decoded sample): they are frozen and hold only scalars, strings,
tuples of these structs and ``dict[str, str]``, so none can take part in a reference cycle.
A field that could hold a container of arbitrary objects must drop ``gc=False``.
"""

from __future__ import annotations

import enum
from typing import Literal

import msgspec

SCHEMA_VERSION = 1


class WorkloadKind(enum.StrEnum):
    KUBERNETES_POD = "kubernetes_pod"
    SLURM_JOB = "slurm_job"
    PROCESS = "process"
    MANUAL = "manual"


def primary_rank(kind: str, key: str) -> tuple[int, str]:
    """Sort key of a GPU's holders, primary first: the one whose labels its series carry
    (on the agent's and the collector's /metrics alike) is a Kubernetes pod, then a Slurm
    job, then a manual label, then a bare process; ties broken by workload key."""
    return (_PRIMARY_ORDER.get(kind, len(_PRIMARY_ORDER)), key)


_PRIMARY_ORDER: dict[str, int] = {
    WorkloadKind.KUBERNETES_POD: 0,
    WorkloadKind.SLURM_JOB: 1,
    WorkloadKind.MANUAL: 2,
    WorkloadKind.PROCESS: 3,
}


#: ``Workload.labels`` keys of a Slurm job, as the agent sends them (OpenTelemetry-style
#: ``slurm_*`` names, like the ``slurm_job_id`` metric label); the collector reads these
SLURM_STEP_LABEL = "slurm_step"
SLURM_ACCOUNT_LABEL = "slurm_account"
SLURM_PARTITION_LABEL = "slurm_partition"
SLURM_QOS_LABEL = "slurm_qos"
SLURM_TIME_LIMIT_LABEL = "slurm_time_limit_seconds"
SLURM_GPUS_LABEL = "slurm_gpus"

#: ``Workload.gpu_sharing`` values: how a workload shares a physical GPU with others
GPU_SHARING_MODES = ("time_slicing", "mps", "hami", "volcano")


class Workload(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """Who holds a GPU: a pod, a Slurm job, a bare process or a manual label.

    ``id`` is the stable identifier within its kind: the pod UID when known (else
    ``namespace/name``), the Slurm job id, the PID, or the manual name.
    """

    kind: WorkloadKind
    id: str
    name: str | None = None
    namespace: str | None = None
    container: str | None = None
    slurm_job_id: str | None = None
    user: str | None = None
    team: str | None = None
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    #: how this workload shares the GPU it is listed on (one of ``GPU_SHARING_MODES``:
    #: time-slicing, MPS, HAMi or Volcano vGPU); None: the GPU is not known to be shared
    gpu_sharing: str | None = None
    #: 0..1, the share of this GPU the workload declared (HAMi ``nvidia.com/gpucores``,
    #: Volcano ``volcano.sh/vgpu-cores``, as a fraction of 100 %); None where none is
    #: declared (time-slicing and MPS replicas declare none)
    gpu_share: float | None = None

    @property
    def key(self) -> str:
        """A fleet-unique, human-readable key: ``pod:ns/name``, ``slurm:123``, ..."""
        if self.kind is WorkloadKind.KUBERNETES_POD:
            return f"pod:{self.namespace or ''}/{self.name or self.id}"
        if self.kind is WorkloadKind.SLURM_JOB:
            return f"slurm:{self.slurm_job_id or self.id}"
        if self.kind is WorkloadKind.PROCESS:
            return f"process:{self.id}"
        return f"manual:{self.name or self.id}"


class ProcessSample(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One process with a context on a GPU."""

    pid: int
    used_memory_bytes: int | None = None
    #: share of the GPU's SM time this process used over the last interval (0..1);
    #: from nvmlDeviceGetProcessUtilization, ``None`` where the driver cannot say.
    sm_share: float | None = None
    #: "compute" or "graphics"
    type: str = "compute"
    name: str | None = None
    workload: Workload | None = None


class GpuInfo(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """A GPU's identity; sent with each batch so the collector knows what it holds.

    A MIG instance is a GpuInfo of its own with ``mig_parent_uuid`` and ``mig_profile``
    (for example ``3g.40gb``); its ``uuid`` is the ``MIG-...`` UUID.
    """

    uuid: str
    index: int
    name: str
    architecture: str | None = None
    memory_total_bytes: int | None = None
    pci_bus_id: str | None = None
    mig_parent_uuid: str | None = None
    mig_profile: str | None = None
    #: the MIG GPU instance id (nvmlDeviceGetGpuInstanceId) for MIG instances
    mig_gpu_instance_id: int | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    power_limit_watts: float | None = None
    #: True when this physical GPU has MIG mode enabled (its instances report separately)
    mig_enabled: bool = False


class GpuSample(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One reading of one GPU or MIG instance at ``timestamp`` (Unix seconds, event time)."""

    timestamp: float
    gpu_uuid: str
    #: 0..1. GPM SM utilisation on Hopper+ (DCGM's SM_ACTIVE), else NVML utilization.gpu/100.
    sm_activity: float | None = None
    #: 0..1. GPM SM occupancy (DCGM's SM_OCCUPANCY); None without GPM.
    sm_occupancy: float | None = None
    #: 0..1. GPM tensor-core activity; None without GPM.
    tensor_activity: float | None = None
    #: 0..1. GPM DRAM bandwidth utilisation, else NVML utilization.memory/100.
    dram_activity: float | None = None
    #: True when sm_activity/dram_activity come from the coarse NVML utilisation counters
    #: ("a kernel was running") rather than GPM.
    activity_coarse: bool = False
    power_watts: float | None = None
    #: NVML total energy counter (joules since driver load); monotonic until a reload.
    energy_joules: float | None = None
    temperature_celsius: float | None = None
    memory_temperature_celsius: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    #: driver-reserved memory (memory info v2); None on v1
    memory_reserved_bytes: int | None = None
    sm_clock_hertz: float | None = None
    memory_clock_hertz: float | None = None
    #: NVML clocks-event reasons bitmask (nvmlClocksEventReason*); see THROTTLE_REASONS
    throttle_reasons: int | None = None
    #: XID codes observed since the previous sample
    xid_errors: tuple[int, ...] = ()
    #: volatile ECC error counts since driver load
    ecc_corrected_total: int | None = None
    ecc_uncorrected_total: int | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    processes: tuple[ProcessSample, ...] = ()
    workloads: tuple[Workload, ...] = ()
    #: False when the GPU fell off the bus or NVML failed for it; the other fields are None.
    healthy: bool = True
    error: str | None = None
    #: 0..1. NVENC / NVDEC busy share over NVML's sampling period (nvidia-smi's
    #: utilization.encoder/decoder); None where the GPU or MIG instance cannot say.
    #: Last, with defaults, so older senders and readers keep working.
    encoder_activity: float | None = None
    decoder_activity: float | None = None
    #: Bottleneck signals (issue 24). Bytes per second over the last interval, from GPM on
    #: Hopper+ or NVML's byte-counter fields elsewhere (never the blocking 20 ms
    #: nvmlDeviceGetPcieThroughput); None where the GPU cannot say.
    pcie_tx_bytes_per_second: float | None = None
    pcie_rx_bytes_per_second: float | None = None
    nvlink_tx_bytes_per_second: float | None = None
    nvlink_rx_bytes_per_second: float | None = None
    #: 0..1. GPM pipe activity (DCGM's PIPE_FP64/FP32/FP16_ACTIVE); None without GPM.
    fp64_activity: float | None = None
    fp32_activity: float | None = None
    fp16_activity: float | None = None
    #: the PCIe link now and at most (a link below its maximum is downtrained; an idle
    #: GPU may lower its generation to save power, so compare under load)
    pcie_link_generation: int | None = None
    pcie_link_width: int | None = None
    pcie_link_generation_max: int | None = None
    pcie_link_width_max: int | None = None
    #: PCIe replay counter since driver load (nvmlDeviceGetPcieReplayCounter)
    pcie_replays_total: int | None = None
    #: 0..1 of the fan's maximum speed; None on passively cooled GPUs
    fan_speed_ratio: float | None = None
    #: pages retired for ECC errors (pre-Ampere; remapped rows on Ampere+) and whether a
    #: retirement waits for the next driver reload
    retired_pages_total: int | None = None
    retired_pages_pending: bool | None = None
    #: the SM clock the GPU runs at without throttling (default applications clock,
    #: nvidia-smi clocks.default_applications.sm); a busy GPU below it is held back
    sm_clock_default_hertz: float | None = None


class WorkloadHostSample(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """A workload's use of its host at ``timestamp``: CPU against its cgroup limit and
    memory pressure, so the collector can tell a GPU starved by its data loader.

    ``workload_key`` is ``Workload.key`` of a holder named in this batch's samples.
    """

    timestamp: float
    workload_key: str
    #: CPU cores used over the last interval (cgroup cpu.stat usage_usec delta / elapsed)
    cpu_used_cores: float | None = None
    #: the cgroup's CPU limit in cores (cpu.max quota/period); None when unlimited
    cpu_limit_cores: float | None = None
    #: 0..1, share of the last interval CPU-runnable tasks waited on a throttled quota
    #: (cpu.stat nr_throttled/nr_periods); None where the cgroup cannot say
    cpu_throttled_ratio: float | None = None
    #: 0..1, PSI memory "some" avg10 / 100 (memory.pressure)
    memory_pressure_ratio: float | None = None
    memory_used_bytes: int | None = None
    memory_limit_bytes: int | None = None


class Batch(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What the agent POSTs to ``/v1/batches``.

    ``(node, agent_boot_id, seq)`` identifies a batch; ``seq`` increases by one per batch
    within a boot. The collector acknowledges a repeated batch and ignores it.
    """

    schema_version: int
    node: str
    agent_boot_id: str
    seq: int
    #: agent wall clock when the batch was built (Unix seconds), for skew detection
    sent_at: float
    gpus: tuple[GpuInfo, ...]
    samples: tuple[GpuSample, ...]
    agent_version: str = ""
    #: node labels from config (region, zone, team, ...)
    node_labels: dict[str, str] = msgspec.field(default_factory=dict)
    #: per-workload host CPU and memory from its cgroup, one per workload per tick (issue 24)
    hosts: tuple[WorkloadHostSample, ...] = ()


class BatchAck(msgspec.Struct, frozen=True, kw_only=True):
    """The collector's answer to a batch."""

    status: Literal["accepted", "duplicate"]
    node: str
    agent_boot_id: str
    seq: int
    samples_accepted: int = 0
    #: samples of this batch not accounted because they fall behind event time the
    #: collector has already applied (a node clock that stepped, or a batch held too long)
    samples_late: int = 0
    #: what the sender should know about an accepted batch, one sentence each
    warnings: tuple[str, ...] = ()


#: NVML clocks-event (throttle) reason bits, from nvml.h (nvmlClocksEventReason*).
THROTTLE_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


_ENCODER = msgspec.json.Encoder()


def encode_batch(batch: Batch) -> bytes:
    """JSON bytes for a batch (the wire format)."""
    return _ENCODER.encode(batch)


def decode_batch(data: bytes) -> Batch:
    """Decode and type-check a batch; raises msgspec.ValidationError naming the bad field."""
    return msgspec.json.decode(data, type=Batch)
