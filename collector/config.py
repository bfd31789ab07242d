"""The collector's settings: one frozen object from ``--config FILE`` and the environment.

Override any key with ``GPUFLEET_<SECTION>__<KEY>``, e.g. ``GPUFLEET_SERVER__PORT=8080``.
Secrets (agent tokens) come from the environment or files, never from logs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from collector.actions.settings import ActionSettings
from collector.cluster.settings import ClusterSettings
from collector.influx.settings import InfluxSettings
from collector.kube.settings import KubeMetadataSettings
from collector.notify.answer_settings import AnswerSettings
from collector.notify.report_settings import ReportSettings
from collector.notify.settings import NotificationSettings
from gpufleet.settings import ConfigError


@dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    #: accepted tokens, comma separated (prefer tokens_file or the environment); each
    #: ``<token> [scopes] [nodes=<glob>,...] [name=<id>]`` as in collector/http/tokens.py
    tokens: list[str] = field(default_factory=list)
    #: a file with one token per line, with its scopes (collector/http/tokens.py)
    tokens_file: Path | None = None
    #: no auth at all (the demo on localhost); refused unless explicitly set
    allow_anonymous: bool = False
    #: request body limit, compressed and decompressed
    max_body_bytes: int = 16 * 1024 * 1024
    #: public URL of this collector, used in links (chat messages)
    public_url: str = ""
    grafana_url: str = ""
    # -- access (collector/http/auth.py): who may do what, and what a guesser is allowed --
    #: GET /metrics needs a token with the metrics scope (it names nodes, GPUs and pods);
    #: off: Prometheus scrapes without one, as usual
    metrics_require_token: bool = False
    #: failed authentications one client address may make per second, sustained ...
    auth_failures_per_second: float = 10.0
    #: ... and in a burst; past them it is answered 429 with Retry-After
    auth_failure_burst: int = 50
    #: request line plus headers larger than this are refused (400) before any is parsed
    max_header_bytes: int = 64 * 1024
    # -- admission control (collector/http/admission.py): past any bound a batch is
    # answered 429 with Retry-After before its body is read, and the agent keeps it
    #: bytes of batch bodies being read or queued and not yet stored; 256 MiB keeps a
    #: burst of 16 maximal (16 MiB) bodies, or ~2,000 typical 100 KiB ones, in memory
    max_inflight_bytes: int = 256 * 1024 * 1024
    #: batches queued for the ingest thread and not yet stored; 2,000 is ~10 s of a
    #: 10,000-node fleet shipping every 5 s, past which answers only grow later
    max_queued_batches: int = 2000
    #: how far the event loop may run behind its schedule (the most its 0.1 s probe was
    #: late in the last 2 s): past it the collector is past its knee, HTTP work itself
    #: saturates the loop before the two bounds above fill, and a batch taken now would
    #: be answered only later, after the agent may have timed out and resent it
    max_loop_lag_seconds: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ConfigError(f"server.port: must be 1..65535, got {self.port}")
        if not 0 < self.max_loop_lag_seconds <= 60:
            raise ConfigError(
                f"server.max_loop_lag_seconds: must be > 0 and <= 60, "
                f"got {self.max_loop_lag_seconds}"
            )
        if not (self.auth_failures_per_second > 0 and self.auth_failure_burst >= 1):
            raise ConfigError(
                "server.auth_failures_per_second and server.auth_failure_burst: must be "
                f"> 0 and >= 1, got {self.auth_failures_per_second} and "
                f"{self.auth_failure_burst}"
            )
        if self.max_header_bytes < 4096:
            raise ConfigError(
                f"server.max_header_bytes: must be at least 4096, got {self.max_header_bytes}"
            )
        if self.max_queued_batches < 1:
            raise ConfigError(
                f"server.max_queued_batches: must be >= 1, got {self.max_queued_batches}"
            )
        if self.max_inflight_bytes < self.max_body_bytes:
            raise ConfigError(
                f"server.max_inflight_bytes: must be at least server.max_body_bytes "
                f"({self.max_body_bytes}), got {self.max_inflight_bytes}"
            )


@dataclass(frozen=True)
class IngestSettings:
    #: samples stamped further in the future than this (collector clock) are rejected
    future_tolerance_seconds: float = 300.0
    #: samples older than this are rejected
    past_tolerance_seconds: float = 7 * 24 * 3600.0
    #: samples are held this long (event time) per GPU so late ones apply in order
    reorder_window_seconds: float = 30.0
    #: samples after a gap (longer than analysis.stale_after_seconds) wait this long
    #: (collector clock) for older batches to fill it, as when an agent drains its spool
    #: out of order; then the gap is accounted as unknown and later fillers are too late
    backfill_wait_seconds: float = 120.0
    #: a node clock offset smaller than this is not corrected: what a batch's delivery
    #: delay makes of a synchronised clock (the demo, whose clock moves in --step jumps,
    #: sets two steps)
    clock_correction_min_seconds: float = 2.0
    #: ready samples are applied (accounted into memory, their buffers freed) this often
    #: (wall clock); shorter holds fewer samples in memory
    apply_interval_seconds: float = 15.0
    #: what was applied is committed to the ledger at an apply at least this long after
    #: the last commit (collector clock): ledger figures (reports, fleet totals on
    #: /metrics) trail the newest samples by up to the reorder window plus this plus one
    #: apply interval. Shorter costs more CPU: each commit rewrites a row per GPU, per
    #: workload and per histogram bucket touched. After kill -9 a restart replays from the
    #: batch log what the last commit had not covered.
    commit_interval_seconds: float = 60.0
    # -- memory bounds (collector/fleet/limits.py): a batch that would pass one is refused
    # whole, before it is stored, with a message naming the setting to raise
    #: GPUs and MIG instances one node may report: an 8-GPU node with 7 MIG slices each
    #: is 64 (8 parents + 56 slices); a node past it is misconfigured or hostile (422)
    max_gpus_per_node: int = 64
    #: GPUs and MIG instances in the live fleet (~1.5 KiB of memory and 2 /metrics series
    #: each): 50,000 is 5x what one collector on SQLite carries at 1 Hz (429 past it)
    max_gpus: int = 50_000
    #: distinct workloads (pods, jobs) holding live GPUs: 2 per GPU of max_gpus
    max_workloads: int = 100_000
    #: distinct values of each free-form label that reaches /metrics as a label value
    #: (node label ``region``, workload namespace and team): a site has tens
    max_label_values: int = 1000
    #: a GPU not heard from for this long (collector clock) leaves the live fleet and
    #: /metrics (its hourly rollups stay in the ledger), with its node once the node has
    #: none left; must be longer than analysis.stale_after_seconds
    forget_after_seconds: float = 24 * 3600.0

    def __post_init__(self) -> None:
        for key in ("apply_interval_seconds", "commit_interval_seconds"):
            value = getattr(self, key)
            if not 0 < value <= 300:
                raise ConfigError(f"ingest.{key}: must be > 0 and <= 300, got {value}")
        for key in ("max_gpus_per_node", "max_gpus", "max_workloads", "max_label_values"):
            if getattr(self, key) < 1:
                raise ConfigError(f"ingest.{key}: must be >= 1, got {getattr(self, key)}")


@dataclass(frozen=True)
class AnalysisSettings:
    #: a sample is idle when SM and DRAM activity are both below this (0..1)
    idle_threshold: float = 0.01
    #: a gap between samples longer than this is unknown, not idle or active
    stale_after_seconds: float = 60.0
    #: idle episodes shorter than this are not stored or reported as episodes (their idle
    #: seconds and waste still count): bursty inference is idle between requests many
    #: times a minute, and 1 s episodes would fill the ledger (tens of thousands per GPU
    #: a day) without telling an operator anything
    min_episode_seconds: float = 60.0
    #: an allocated GPU idle this long gets a release recommendation
    idle_window_seconds: float = 1800.0
    #: an open recommendation resolves after its subject has been fine this long
    resolve_after_seconds: float = 300.0
    evaluation_interval_seconds: float = 60.0
    #: right-sizing needs at least this much history
    right_size_min_seconds: float = 24 * 3600.0
    #: pricing-plan advice looks back this far
    pricing_lookback_seconds: float = 30 * 24 * 3600.0
    #: pricing-plan advice recommends commitments up to this term (a 3-year plan on a
    #: 30-day window is a bet; it is still shown in `gpufleet report --plans`)
    pricing_max_term_months: int = 12
    #: the fleet's utilisation target (0..1): reports show the gap to it and how much of
    #: it each open recommendation closes
    utilisation_target: float = 0.7
    #: bottleneck verdicts (issue 24) judge each workload over this much recent history
    bottleneck_window_seconds: float = 1800.0
    #: GPUs every node should have (0: unset; then the most a node reported); a node's
    #: ``expected_gpus`` label overrides it. Fewer working: a broken_gpus recommendation
    expected_gpus_per_node: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.idle_threshold < 1:
            raise ConfigError(
                f"analysis.idle_threshold: must be in [0, 1), got {self.idle_threshold}"
            )
        if not 0 <= self.min_episode_seconds < math.inf:
            raise ConfigError(
                f"analysis.min_episode_seconds: must be a finite number >= 0, "
                f"got {self.min_episode_seconds}"
            )
        if self.pricing_lookback_seconds < 7 * 24 * 3600.0:
            raise ConfigError(
                f"analysis.pricing_lookback_seconds: must be at least 7 days (604800), "
                f"got {self.pricing_lookback_seconds}"
            )
        if self.pricing_max_term_months < 1:
            raise ConfigError(
                "analysis.pricing_max_term_months: must be >= 1, "
                f"got {self.pricing_max_term_months}"
            )
        if not 0 < self.utilisation_target <= 1:
            raise ConfigError(
                f"analysis.utilisation_target: must be in (0, 1], got {self.utilisation_target}"
            )
        if self.idle_window_seconds <= 0:
            raise ConfigError(
                f"analysis.idle_window_seconds: must be > 0, got {self.idle_window_seconds}"
            )
        if not 0 <= self.expected_gpus_per_node <= 1024:
            raise ConfigError(
                "analysis.expected_gpus_per_node: must be a count from 0 (unset) to 1024, "
                f"got {self.expected_gpus_per_node}"
            )
        if not 60.0 <= self.bottleneck_window_seconds <= 24 * 3600.0:
            raise ConfigError(
                "analysis.bottleneck_window_seconds: must be between 60 and 86400 (a day), "
                f"got {self.bottleneck_window_seconds}"
            )


@dataclass(frozen=True)
class LedgerSettings:
    #: SQLite file path, or a postgresql:// URL; acknowledged batches wait in the
    #: directory ``<url>-intake`` beside it until applied
    url: str = "gpufleet.db"
    #: keep hourly rollups this long; raw pending batches are removed once applied
    retention_days: int = 400
    #: FULL: every acknowledged batch is fdatasynced to the batch log before the 2xx, and
    #: SQLite (``PRAGMA synchronous``) fsyncs the WAL on every commit, so an acknowledged
    #: batch survives a power loss. NORMAL syncs neither: it survives kill -9 at about two
    #: thirds of the CPU, but a power loss may drop the last seconds of acknowledged
    #: batches, which the agents have already deleted from their spools
    synchronous: str = "FULL"

    def __post_init__(self) -> None:
        if self.synchronous not in ("FULL", "NORMAL"):
            raise ConfigError(
                f"ledger.synchronous: must be FULL or NORMAL, got {self.synchronous!r}"
            )


@dataclass(frozen=True)
class PricingSettings:
    #: a price book YAML; empty = the shipped example (collector/data/pricebook.yaml)
    price_book: Path | None = None
    currency: str = ""


@dataclass(frozen=True)
class CarbonSettings:
    #: default grid region for nodes without a region label (e.g. "DEU", "US-CA", "CN")
    region: str = "world"
    pue: float = 1.2
    #: an hourly intensity feed in Electricity Maps' history response format (JSON file)
    intensity_feed: Path | None = None
    #: node name -> region, for nodes that do not send a `region` label
    node_regions: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 1.0 <= self.pue <= 3.0:
            raise ConfigError(f"carbon.pue: must be between 1.0 and 3.0, got {self.pue}")


@dataclass(frozen=True)
class CollectorSettings:
    server: ServerSettings = field(default_factory=ServerSettings)
    ingest: IngestSettings = field(default_factory=IngestSettings)
    analysis: AnalysisSettings = field(default_factory=AnalysisSettings)
    ledger: LedgerSettings = field(default_factory=LedgerSettings)
    pricing: PricingSettings = field(default_factory=PricingSettings)
    carbon: CarbonSettings = field(default_factory=CarbonSettings)
    notifications: NotificationSettings = field(default_factory=NotificationSettings)
    actions: ActionSettings = field(default_factory=ActionSettings)
    influx: InfluxSettings = field(default_factory=InfluxSettings)
    #: shards and leases of collector replicas sharing a PostgreSQL ledger
    cluster: ClusterSettings = field(default_factory=ClusterSettings)
    #: buttons that answer back from chat, and their secrets (collector/notify/answer_settings.py)
    answers: AnswerSettings = field(default_factory=AnswerSettings)
    #: efficiency reports per user and team, to chat and by email
    reports: ReportSettings = field(default_factory=ReportSettings)
    #: pod metadata from the API server: owners, teams, users (collector/kube)
    kubernetes: KubeMetadataSettings = field(default_factory=KubeMetadataSettings)

    def __post_init__(self) -> None:
        forget, stale = self.ingest.forget_after_seconds, self.analysis.stale_after_seconds
        if not stale < forget < math.inf:
            raise ConfigError(
                f"ingest.forget_after_seconds: must be longer than "
                f"analysis.stale_after_seconds ({stale:g}), got {forget:g}"
            )
