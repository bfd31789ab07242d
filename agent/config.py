"""The agent's settings: one frozen object built from ``--config FILE`` and the environment.

Every key can be overridden with ``GPUFLEET_<SECTION>__<KEY>``, e.g.
``GPUFLEET_SHIPPER__URL=http://collector:8080``. Each key maps to one Helm value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gpufleet.settings import ConfigError


@dataclass(frozen=True)
class NodeSettings:
    #: node name; defaults to $NODE_NAME (downward API) or the host name
    name: str | None = None
    #: labels sent with every batch (region, zone, team, ...)
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceSettings:
    kind: Literal["nvml", "simulated", "replay"] = "nvml"
    interval_seconds: float = 1.0
    #: deadline for one NVML call; a wedged GPU is marked unhealthy past it
    nvml_call_timeout_seconds: float = 2.0
    #: GPM needs two samples this far apart at least (NVML requires >= 0.1 s)
    gpm_sample_gap_seconds: float = 0.1
    replay_path: Path | None = None
    simulated_gpus: int = 8
    #: simulated GPU model names (cycled over the GPUs), e.g. ["H100"]
    simulated_models: list[str] = field(default_factory=lambda: ["H100"])
    simulated_seed: int = 0

    def __post_init__(self) -> None:
        if self.interval_seconds <= 0:
            raise ConfigError(f"source.interval_seconds: must be > 0, got {self.interval_seconds}")
        if self.simulated_gpus < 1:
            raise ConfigError(f"source.simulated_gpus: must be >= 1, got {self.simulated_gpus}")


@dataclass(frozen=True)
class ShipperSettings:
    enabled: bool = True
    #: collector base URL, e.g. http://gpufleet-collector:8080
    url: str | None = None
    #: bearer token inline (prefer token_file or the environment)
    token: str | None = None
    token_file: Path | None = None
    batch_interval_seconds: float = 5.0
    request_timeout_seconds: float = 10.0
    initial_backoff_seconds: float = 1.0
    max_backoff_seconds: float = 60.0
    spool_dir: Path = Path("/var/lib/gpufleet/spool")
    spool_max_bytes: int = 256 * 1024 * 1024
    spool_max_age_seconds: float = 7 * 24 * 3600.0
    #: a longer buffer is cut into several batches, so no request grows past what a
    #: collector or proxy accepts (a 413 can never succeed on retry)
    max_samples_per_batch: int = 5000

    def __post_init__(self) -> None:
        if self.max_samples_per_batch < 1:
            raise ConfigError(
                f"shipper.max_samples_per_batch: must be >= 1, got {self.max_samples_per_batch}"
            )
        if self.batch_interval_seconds <= 0:
            raise ConfigError(
                f"shipper.batch_interval_seconds: must be > 0, got {self.batch_interval_seconds}"
            )
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"shipper.url: must start with http:// or https://, got {self.url!r}")


@dataclass(frozen=True)
class ExporterSettings:
    enabled: bool = True
    address: str = "0.0.0.0"
    port: int = 9835
    #: also export dcgm-exporter names, units and labels
    dcgm_compat: bool = False
    #: which dcgm-exporter naming: "4.8" (the names NVIDIA's dashboard and most existing
    #: dashboards query: the default, so they work unmodified) or "4.9" (DCGM 4.7 names,
    #: SI-like units, for dashboards already moved to dcgm-exporter 4.9)
    dcgm_naming: Literal["4.8", "4.9"] = "4.8"

    def __post_init__(self) -> None:
        if self.dcgm_naming not in ("4.8", "4.9"):
            raise ConfigError(
                f'exporter.dcgm_naming: must be "4.8" or "4.9", got {self.dcgm_naming!r}'
            )


@dataclass(frozen=True)
class AttributionSettings:
    kubelet_socket: Path = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
    proc_root: Path = Path("/proc")
    #: jobstats convention: one file per GPU index or UUID holding "jobid uid"
    gpustat_dir: Path = Path("/run/gpustat")
    #: dcgm-exporter's hpc-job-mapping directory (one file per GPU listing job ids)
    hpc_job_mapping_dir: Path | None = None
    refresh_seconds: float = 5.0
    #: manual labels: GPU UUID or index -> {"name": ..., "namespace": ..., "team": ...}
    manual: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Slurm's ``squeue`` (account, partition, QOS, user, time limit, GPUs of this node's
    #: jobs); "auto": the one on PATH where the node has a Slurm config; "": never asked
    squeue_path: str = "auto"
    #: SLURM_CONF for squeue, where the node has no /etc/slurm/slurm.conf
    slurm_conf: Path | None = None
    #: this node's name in Slurm (SLURMD_NODENAME); empty: the short host name
    slurm_node: str = ""
    #: a slow slurmctld holds up one sampling tick at most this long per refresh
    squeue_timeout_seconds: float = 2.0
    #: read each GPU-holding workload's host CPU and memory from its cgroup (NVML source)
    host_usage: bool = True
    #: the host's cgroup filesystem (in a pod: the host's, mounted read-only)
    cgroup_root: Path = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class AgentSettings:
    node: NodeSettings = field(default_factory=NodeSettings)
    source: SourceSettings = field(default_factory=SourceSettings)
    shipper: ShipperSettings = field(default_factory=ShipperSettings)
    exporter: ExporterSettings = field(default_factory=ExporterSettings)
    attribution: AttributionSettings = field(default_factory=AttributionSettings)
