"""What the collector's HTTP edge and exporters need from the core, and what they answer.

``CollectorBackend`` is the one seam between the edge (http/app.py, metrics/exporter.py)
and the stateful core (ingest queue, live fleet, ledger). The edge never imports the core;
``gpufleet``'s CLI wires the real one in (``service.CollectorService``), tests wire a fake
holding plain data.

Money is in the price book's currency (named by ``currency`` fields), energy in joules,
carbon in grams CO2e, time in Unix seconds.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Collection, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import msgspec

from agent.model import BatchAck
from collector.health import WritePath
from collector.node_binding import NodeBinding
from collector.records import (
    DuplicateGpu,
    GpuState,
    GpuView,
    Recommendation,
    RecommendationStatus,
    Usage,
)


class RejectReason(enum.StrEnum):
    """Why the edge refused a batch; the ``reason`` label of the rejection counters."""

    UNAUTHORIZED = "unauthorized"
    TOO_LARGE = "too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    MALFORMED = "malformed"  # not JSON, wrong types, bad gzip
    SCHEMA_VERSION = "schema_version"
    INVALID_VALUE = "invalid_value"  # NaN, infinite, negative, out of range
    FUTURE_TIMESTAMP = "future_timestamp"
    PAST_TIMESTAMP = "past_timestamp"
    UNKNOWN_GPU = "unknown_gpu"
    #: a GPU uuid another node still reports (collector/fleet/claims.py)
    DUPLICATE_GPU = "duplicate_gpu"
    #: a batch for a node its agent token is not bound to (collector/node_binding.py)
    NODE_NOT_ALLOWED = "node_not_allowed"
    #: checking the batch failed unexpectedly (a bug): that batch alone is answered 500
    INTERNAL_ERROR = "internal_error"
    #: past a memory bound: GPUs per node or fleet, workloads, label values
    #: (collector/fleet/limits.py)
    LIMIT_EXCEEDED = "limit_exceeded"
    #: shed at the edge: in-flight bytes or queued batches past their bound
    #: (collector/http/admission.py)
    OVERLOADED = "overloaded"


class LateReason(enum.StrEnum):
    """Why samples of an accepted batch were not accounted; the ``reason`` label of
    ``gpufleet_collector_late_samples_total``."""

    #: behind event time the collector already applied for the GPU (a node clock that
    #: stepped, or a batch held too long): the ack's ``samples_late``
    BEHIND_APPLIED = "behind_applied"
    #: a second sample of a GPU at a timestamp already applied
    DUPLICATE_TIMESTAMP = "duplicate_timestamp"


class ImplausibleField(enum.StrEnum):
    """A value taken as not measured, though accepted: the ``field`` label of
    ``gpufleet_collector_implausible_samples_total``."""

    #: an energy-counter delta above what the GPU can draw: estimated from power instead
    ENERGY_JOULES = "energy_joules"


class IngestError(Exception):
    """A batch the collector refuses: HTTP ``status``, a message, and the offending field
    as a JSON path (``$.samples[3].power_watts``) where one can be named."""

    def __init__(
        self,
        status: int,
        message: str,
        field: str | None = None,
        reason: RejectReason | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.reason = reason or RejectReason.MALFORMED
        #: samples the refused batch carried, once it decoded (0: unknown)
        self.samples = 0
        #: for a 429: whole seconds the sender should wait (the ``Retry-After`` header)
        self.retry_after_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class WorkloadReport:
    """One workload's usage over a time range, for ``GET /v1/workloads``.

    ``usage`` sums the hourly rollups of the hours the range touches (hour granularity),
    and the idle episodes are counted over the same hours.
    """

    key: str  # agent.model.Workload.key, e.g. "pod:ml/notebook-7"
    kind: str
    name: str
    namespace: str
    team: str
    user: str
    currency: str
    usage: Usage
    #: GPU models the workload held in the range, e.g. ("H100",)
    gpu_models: tuple[str, ...] = ()
    #: idle episodes in the range at least ``analysis.min_episode_seconds`` long
    idle_episodes: int = 0
    longest_idle_seconds: float = 0.0
    #: the top of a pod's owner chain ("Deployment/ml/llm-serve"), a Slurm job's user
    #: ("User/alice"); "" when unknown
    owner: str = ""


@dataclass(frozen=True, slots=True)
class HealthReport:
    """``GET /healthz``: 200 when ``ledger_ok``, else 503. ``GET /readyz`` answers
    ``ready`` and ``problems`` alone."""

    ledger_ok: bool
    #: wall-clock time the last batch was accepted; None before the first one
    last_ingest_at: float | None
    #: how far applied event time trails the newest received sample (reorder window)
    lag_seconds: float
    #: samples received and durable but not yet applied to fleet state
    pending_samples: int
    detail: str = ""
    #: node -> how far its clock is ahead of the collector's, in seconds (negative: behind)
    clock_offsets: dict[str, float] = field(default_factory=dict)
    #: the write path works: the ledger answers, commits and intake-log appends succeed
    #: (False: ``problems`` says what fails and what to do; ``ledger_ok`` is False too)
    ready: bool = True
    problems: tuple[str, ...] = ()
    write_path: WritePath = field(default_factory=WritePath)


class WasteTotal(msgspec.Struct, frozen=True, gc=False):
    """Idle GPU-seconds and their cost since the ledger began, for one (namespace,
    workload, model). ``workload`` is the workload key; "" for unallocated GPUs.

    A frozen msgspec Struct (gc=False), as ``EnergyTotal``: a /metrics re-render after a
    commit builds one per workload, and a frozen dataclass's __init__ cost ~1.6 us each
    (~16 ms of both at 5,000 workloads)."""

    namespace: str
    workload: str
    team: str
    model: str
    idle_gpu_seconds: float
    waste: float
    #: when the workload last held a GPU (event time); inf for the unallocated rows
    last_seen: float = math.inf


class EnergyTotal(msgspec.Struct, frozen=True, gc=False):
    """Energy and carbon since the ledger began, for one workload ("" = unallocated)."""

    namespace: str
    workload: str
    team: str
    energy_joules: float
    carbon_grams: float
    #: the part of energy_joules integrated from power (GPUs without an energy counter)
    estimated_energy_joules: float = 0.0
    #: when the workload last held a GPU (event time); inf for the unallocated row
    last_seen: float = math.inf
    #: the workload's owner (``Kind/namespace/name``), user, queue and priority class,
    #: "" when unknown
    owner: str = ""
    user: str = ""
    queue: str = ""
    priority_class: str = ""


@dataclass(frozen=True, slots=True)
class IngestCounters:
    """Ingest self-metrics since the process started (Prometheus counters: they may reset)."""

    batches_accepted: int = 0
    batches_duplicate: int = 0
    #: RejectReason value -> batches refused (by the edge via record_rejection, or the core)
    batches_rejected: dict[str, int] = field(default_factory=dict)
    samples_accepted: int = 0
    #: RejectReason value -> samples in refused batches
    samples_rejected: dict[str, int] = field(default_factory=dict)
    #: samples that arrived behind already-applied event time (outside the reorder window)
    late_samples: int = 0
    #: LateReason value -> samples not accounted for that reason (sums to late_samples)
    late_samples_by_reason: dict[str, int] = field(default_factory=dict)
    #: ImplausibleField value -> samples whose value was not taken as measured
    implausible_samples: dict[str, int] = field(default_factory=dict)
    #: wall seconds spent inside ``ingest``
    ingest_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What the collector keeps in memory about its intake, read on every /metrics scrape:
    never from the ledger."""

    counters: IngestCounters
    #: damaged batch log records skipped at open (collector/ledger/log_records.py)
    intake_corrupt_records: int
    #: wall-clock time the last batch was accepted; None before the first one
    last_ingest_at: float | None


@dataclass(frozen=True, slots=True)
class FleetTotals:
    """Running totals for the exporter's counters."""

    currency: str
    waste: tuple[WasteTotal, ...] = ()
    energy: tuple[EnergyTotal, ...] = ()
    ingest: IngestCounters = field(default_factory=IngestCounters)
    #: damaged batch log records skipped at open (collector/ledger/log_records.py)
    intake_corrupt_records: int = 0


@dataclass(frozen=True, slots=True)
class FleetRates:
    """What the fleet costs and emits per unit now, for the exporter's rate gauges."""

    currency: str
    #: summed hourly price of every GPU idle now (allocated-idle or unallocated)
    idle_cost_per_hour: float
    #: the site PUE the carbon figures use
    pue_ratio: float
    #: region -> grid intensity (gCO2e/kWh, before PUE) now, for the known nodes' regions
    intensity_g_per_kwh: dict[str, float] = field(default_factory=dict)


class RatesSource(Protocol):
    """Prices and carbon settings in force, applied to the fleet now; thread-safe."""

    def fleet_rates(self, now: float) -> FleetRates: ...


class ReadVersion(NamedTuple):
    """Counters that move whenever what the read routes answer may have changed: the
    cache key of their encoded views (collector/http/views.py). Equal versions promise
    equal data; unequal ones only that it may differ."""

    #: the live fleet (GPUs, states, readings, duplicate claims)
    fleet: int
    #: the ledger (rollups, recommendations, dismissals)
    ledger: int


class CollectorBackend(Protocol):
    """The stateful core as the edge sees it. Every method but ``submit`` is called from
    worker threads (several at once), ``submit`` from the event loop's: implementations
    must be thread-safe, and ``submit`` must not block."""

    def submit(
        self,
        body: bytes,
        content_encoding: str | None,
        received_at: float,
        nodes: NodeBinding | None = None,
    ) -> Future[BatchAck]:
        """Check, store and acknowledge a batch as the agent POSTed it; returns at once.
        With ``nodes`` (the posting token's binding) a batch for a node it does not allow
        fails with a 403 IngestError before anything of it is stored.

        The future has the ack once the batch is durable (the edge awaits it on its event
        loop, which reads the next requests meanwhile). ``body`` is the batch's JSON,
        coded as ``content_encoding`` says (gzip or identity); it is decoded and validated
        (``collector.ingest.decode.accept_body``) off the event loop, and kept pending as
        received (the ledger returns it decompressed). A repeated (node, agent_boot_id,
        seq) acks status "duplicate" and changes nothing. The future fails with
        IngestError to refuse the batch (the edge answers its status and counts it
        through record_rejection); with any other exception the edge answers 503 so the
        agent retries.
        """
        ...

    def record_rejection(self, reason: RejectReason, samples: int) -> None:
        """Count a batch the edge refused (``samples``: how many it carried, 0 if unknown)."""
        ...

    def fleet(self, now: float) -> list[GpuView]:
        """Every known GPU and MIG instance with its state at ``now``."""
        ...

    def duplicate_gpus(self) -> list[DuplicateGpu]:
        """GPU uuids a second node claimed while the first still reported them (refused)."""
        ...

    def workloads(self, start: float, end: float) -> list[WorkloadReport]:
        """Every workload with usage in [start, end)."""
        ...

    def recommendations(self, statuses: Collection[RecommendationStatus]) -> list[Recommendation]:
        """Recommendations in any of ``statuses``, most valuable first."""
        ...

    def dismiss(self, rec_id: str, now: float) -> Recommendation | None:
        """Mark a recommendation dismissed; None when no recommendation has that id."""
        ...

    def restore(self, rec_id: str, now: float) -> Recommendation | None:
        """Undo a dismissal (open again); None when no recommendation has that id."""
        ...

    def health(self) -> HealthReport: ...

    def fleet_totals(self) -> FleetTotals: ...

    def read_version(self) -> ReadVersion:
        """Cheap (no lock, no I/O): called on the event loop before every cached read."""
        ...

    def ingest_report(self) -> IngestReport:
        """The intake's counters and gauges from memory, without touching the ledger."""
        ...


@dataclass(frozen=True, slots=True)
class FleetSummary:
    """The fleet at a glance: GPUs per state, mean SM activity, total power."""

    gpus_by_state: dict[str, int]
    #: mean sm_activity over GPUs in a known state that report it; None when none do
    utilisation_ratio: float | None
    #: summed over physical GPUs (MIG instances excluded, their parent reports power)
    power_watts: float


@dataclass(frozen=True, slots=True)
class FleetResponse:
    """``GET /v1/fleet``. A GPU's current idle duration is ``now - idle_since``."""

    now: float
    summary: FleetSummary
    gpus: Sequence[GpuView]
    #: GPU uuids claimed by a second node while the first still reports them: that node's
    #: batches are refused (409); fix the cloned image or the agent's node name
    duplicate_gpus: Sequence[DuplicateGpu] = ()


@dataclass(frozen=True, slots=True)
class FleetPageResponse:
    """``GET /v1/fleet`` with a filter, ``limit`` or ``cursor``: the GPUs matching, one
    page of them; ``summary`` and ``duplicate_gpus`` are still the whole fleet's."""

    now: float
    summary: FleetSummary
    gpus: Sequence[GpuView]
    duplicate_gpus: Sequence[DuplicateGpu]
    #: GPUs matching the filter, on every page
    total: int
    #: pass as ``cursor`` for the next page; None on the last
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class WorkloadsResponse:
    """``GET /v1/workloads``: ``start``/``end`` as asked; the ledger keeps hourly totals, so
    the figures cover the whole hours the range touches, ``covered_start`` to
    ``covered_end`` (the hour in progress up to now), the same rule as ``gpufleet report``."""

    start: float
    end: float
    workloads: Sequence[WorkloadReport]
    covered_start: float
    covered_end: float


@dataclass(frozen=True, slots=True)
class RecommendationsResponse:
    """``GET /v1/recommendations``."""

    statuses: Sequence[str]
    recommendations: Sequence[Recommendation]


@dataclass(frozen=True, slots=True)
class RecommendationsPageResponse:
    """``GET /v1/recommendations`` with a filter, ``limit`` or ``cursor``."""

    statuses: Sequence[str]
    recommendations: Sequence[Recommendation]
    total: int
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    """Every 4xx/5xx body. ``field`` is a JSON path (``$.samples[3].power_watts``) or a
    query parameter name; None when no single field is at fault."""

    error: str
    field: str | None = None
    reason: str | None = None


def summarise_fleet(views: Sequence[GpuView]) -> FleetSummary:
    """Counts per state (every state present, zeros included), mean SM activity, power."""
    by_state = {state.value: 0 for state in GpuState}
    activities: list[float] = []
    power_watts = 0.0
    for view in views:
        by_state[view.state.value] += 1
        known = view.state is not GpuState.UNKNOWN
        if known and view.sm_activity is not None:
            activities.append(view.sm_activity)
        if known and view.power_watts is not None and view.mig_parent_uuid is None:
            power_watts += view.power_watts
    ratio = sum(activities) / len(activities) if activities else None
    return FleetSummary(by_state, ratio, power_watts)
