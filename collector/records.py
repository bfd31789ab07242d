"""Plain records shared by the collector's pure core, its ledger and its API.

These are the nouns of DESIGN.md section 4. Money is in the price book's currency; energy in
joules; time in Unix seconds; carbon in grams CO2e. Nothing here does I/O.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import msgspec

HOUR_SECONDS = 3600.0
DAY_SECONDS = 24 * HOUR_SECONDS
MONTH_HOURS = 730.0  # 365 * 24 / 12


class Activity(enum.StrEnum):
    """What a GPU was doing at a sample; unknown is never idle."""

    ACTIVE = "active"
    IDLE = "idle"
    UNKNOWN = "unknown"


#: the members as plain module globals for the per-sample code: on Python 3.11 the enum
#: metaclass defines ``__getattr__``, so ``Activity.IDLE`` costs ~10x a global's lookup
ACTIVE, IDLE, UNKNOWN = Activity.ACTIVE, Activity.IDLE, Activity.UNKNOWN


class GpuState(enum.StrEnum):
    """A GPU's state now, for the fleet view and the `gpufleet_fleet_gpus` metric."""

    ACTIVE = "active"
    ALLOCATED_IDLE = "allocated_idle"
    UNALLOCATED = "unallocated"  # nobody holds it (idle or not)
    UNKNOWN = "unknown"  # no fresh data


#: the ``Workload.labels`` key that names a pod's owner, the top of its owner chain as
#: ``Kind/namespace/name`` ("Deployment/ml/llm-serve"); set at ingest (collector/kube)
OWNER_LABEL = "k8s_owner"
#: ... its scheduler queue (Kueue, Volcano) and priority class, likewise
QUEUE_LABEL, PRIORITY_CLASS_LABEL = "k8s_queue", "k8s_priority_class"


@dataclass(frozen=True, slots=True)
class WorkloadRef:
    """The part of agent.model.Workload the collector aggregates by."""

    key: str  # agent.model.Workload.key, e.g. "pod:ml/notebook-7"
    kind: str
    name: str
    namespace: str = ""  # k8s namespace, or the Slurm account/partition where known
    team: str = ""
    user: str = ""
    #: the top of a pod's owner chain, ``Kind/namespace/name``; "" when none is known
    owner: str = ""
    #: a pod's scheduler queue and priority class; "" when none
    queue: str = ""
    priority_class: str = ""


class Interval(msgspec.Struct, gc=False):
    """One applied interval of one GPU: from the previous sample to this one.

    The interval takes the activity of its *starting* sample (a reading holds until the
    next one). ``energy_joules`` is the counter delta (or the trapezoid of power when
    ``energy_estimated``); ``shares`` splits it (and the seconds) among the workloads
    holding the GPU, summing to 1, empty when unallocated. On a shared GPU (``sharing``)
    the seconds and price go by each holder's fraction and own activity instead
    (collector/analysis/shared.py); ``shares`` still splits the energy.

    A msgspec Struct, not a dataclass: one is built per applied sample, and a Struct is
    built in C (~0.12 us, a slotted dataclass's ``__init__`` ~0.37 us). gc=False: it never
    takes part in a reference cycle.
    """

    gpu_uuid: str
    node: str
    model: str
    start: float
    end: float
    activity: Activity
    energy_joules: float
    energy_estimated: bool
    shares: dict[WorkloadRef, float] = msgspec.field(default_factory=dict)
    #: readings of the starting sample, for right-sizing statistics
    memory_used_bytes: int | None = None
    sm_activity: float | None = None
    #: a shared GPU's holders' parts at the starting sample; None when it is not shared
    sharing: SharedUse | None = None

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass(frozen=True, slots=True, eq=False)
class SharedUse:
    """How the holders of one shared GPU take their parts at one sample
    (collector/analysis/shared.py makes them)."""

    #: holder -> fraction of the GPU's price and held time (``price_fractions``)
    fractions: dict[WorkloadRef, float]
    #: holder -> its own SM share (0..1) over the sample's interval; None: unknown
    sm_shares: dict[WorkloadRef, float | None]
    #: holder -> GPU memory its processes use; None: no process reported it
    memory_bytes: dict[WorkloadRef, int | None]


class Usage(msgspec.Struct, gc=False):
    """Accumulated usage of one subject (a GPU or a workload) over some span (an hour).

    A msgspec Struct with gc=False (only floats): each commit builds one per (hour, GPU)
    and per (hour, workload), and objects the GC tracks would survive into its oldest
    generation and set off full collections of the whole heap."""

    active_seconds: float = 0.0
    idle_seconds: float = 0.0
    #: idle while held by a workload (for a GPU); for a workload it equals idle_seconds
    allocated_idle_seconds: float = 0.0
    unknown_seconds: float = 0.0
    energy_joules: float = 0.0
    #: the part of energy_joules that came from power integration, not the counter
    estimated_energy_joules: float = 0.0
    idle_energy_joules: float = 0.0
    #: idle GPU-seconds x hourly price / 3600, in the price book's currency
    idle_cost: float = 0.0
    #: GPU-seconds x hourly price / 3600 for every known second (what the GPU cost)
    cost: float = 0.0
    carbon_grams: float = 0.0
    #: SM activity (0..1) x seconds over the known (active or idle) seconds, so
    #: ``sm_activity_seconds / (active_seconds + idle_seconds)`` is the mean SM activity over
    #: held time; a second with no SM reading adds 0. Rows from before schema V10 say 0
    sm_activity_seconds: float = 0.0

    def add(self, other: Usage) -> None:
        # field by field, not a loop over __slots__: this runs per (hour, GPU) per commit
        self.active_seconds += other.active_seconds
        self.idle_seconds += other.idle_seconds
        self.allocated_idle_seconds += other.allocated_idle_seconds
        self.unknown_seconds += other.unknown_seconds
        self.energy_joules += other.energy_joules
        self.estimated_energy_joules += other.estimated_energy_joules
        self.idle_energy_joules += other.idle_energy_joules
        self.idle_cost += other.idle_cost
        self.cost += other.cost
        self.carbon_grams += other.carbon_grams
        self.sm_activity_seconds += other.sm_activity_seconds


@dataclass(frozen=True, slots=True)
class IdleEpisode:
    """An unbroken run of idle samples of one GPU. ``end`` is None while it lasts."""

    gpu_uuid: str
    node: str
    start: float
    end: float | None
    workload_key: str | None  # who held the GPU at the start; None = unallocated

    def seconds(self, now: float) -> float:
        return (self.end if self.end is not None else now) - self.start


class RecommendationKind(enum.StrEnum):
    RELEASE_IDLE = "release_idle"  # a workload holds GPUs that are idle past the window
    SCALE_DOWN = "scale_down"  # a whole node, every GPU unallocated and idle past the window
    RIGHT_SIZE = "right_size"  # a workload fits a smaller GPU model or a MIG profile
    PRICING_PLAN = "pricing_plan"  # reserved vs on-demand
    #: idle unallocated GPUs spread over busy nodes: move workloads so whole nodes free up
    CONSOLIDATE = "consolidate"
    #: a busy-looking workload held back (input-, CPU-, communication-, memory-bound,
    #: throttled, no tensor cores, a straggler, a faulted GPU): issue 24
    BOTTLENECK = "bottleneck"
    #: a node with GPUs missing, lost or held while broken (XID, ECC, throttled): issue 24
    BROKEN_GPUS = "broken_gpus"


class RecommendationStatus(enum.StrEnum):
    OPEN = "open"
    NOTIFIED = "notified"
    ACTED = "acted"
    RESOLVED = "resolved"
    DISMISSED = "dismissed"


#: a recommendation that still stands: nobody acted yet, or the action was taken and the
#: fleet has not shown the change; notifications and auto-release follow these, and they
#: resolve once no longer desired
LIVE_STATUSES = (
    RecommendationStatus.OPEN,
    RecommendationStatus.NOTIFIED,
    RecommendationStatus.ACTED,
)
#: a recommendation waiting for someone to act on it: what /metrics counts and what the API
#: and the consoles list by default
OPEN_STATUSES = (RecommendationStatus.OPEN, RecommendationStatus.NOTIFIED)


@dataclass(frozen=True, slots=True)
class Savings:
    """What acting on a recommendation saves, and how much evidence stands behind it.

    ``money_per_hour`` is the rate observed now; the ``..._per_month`` figures extrapolate
    it to MONTH_HOURS, the saving *if the situation lasts the month*. ``evidence_seconds``
    is how long the situation behind the figure has been observed (the observation
    window: how long the GPUs have been idle, a profile's history, the pricing look-back
    covered). ``money_per_month_low`` is the low end of the range: the saving if the
    situation lasts only as long again as it has been seen (rate x min(window, month)).
    ``confidence`` (0..1) grows with the window and reaches 1 once the window covers a
    full week (weekday and weekend patterns). Rows stored before these fields existed
    read back with 0 for them (no evidence stated).
    """

    money_per_month: float
    energy_kwh_per_month: float
    carbon_kg_per_month: float
    currency: str
    money_per_hour: float = 0.0
    evidence_seconds: float = 0.0
    money_per_month_low: float = 0.0
    confidence: float = 0.0


@dataclass(frozen=True, slots=True)
class Recommendation:
    """One recommendation. ``id`` is stable for its (kind, subject): re-evaluation updates it."""

    id: str
    kind: RecommendationKind
    subject: str  # workload key, node name, GPU uuid or "model:H100"
    title: str
    evidence: dict[str, object]
    savings: Savings
    status: RecommendationStatus
    opened_at: float
    updated_at: float
    gpu_uuids: tuple[str, ...] = ()
    node: str = ""
    workload_key: str = ""
    namespace: str = ""
    resolved_at: float | None = None
    #: the workload's team, user and owner (``Kind/namespace/name``) from the ledger's
    #: workloads directory when read (not kept in the recommendation: a later-learned owner
    #: shows); "" for a node or model subject, or where nobody said
    team: str = ""
    user: str = ""
    owner: str = ""
    #: what a person types to act on it (collector/notify/commands.py release_command for
    #: a release); "" where there is nothing to type
    command: str = ""


@dataclass(frozen=True, slots=True)
class DuplicateGpu:
    """A GPU uuid that a second node claimed while ``node`` still reported it (a cloned
    VM image, a misconfigured replay, a spoofed agent): ``claimed_by``'s batches were
    refused; times are the collector's arrival times (Unix seconds)."""

    uuid: str
    node: str
    claimed_by: str
    first_refused_at: float
    last_refused_at: float
    batches_refused: int


class HealthProblem(enum.StrEnum):
    """Why a GPU's tile wears a health badge (collector/fleet/health.py decides)."""

    FELL_OFF_BUS = "fell_off_bus"  # XID 79 within the recent window
    XID = "xid"  # another hardware XID (analysis/verdicts.py HARDWARE_XIDS) within it
    ECC = "ecc"  # uncorrected ECC errors since driver load, or remapped rows pending
    THROTTLED = "throttled"  # a power or thermal clocks-event reason (verdicts.THROTTLE_MASK)
    HOT = "hot"  # the GPU's temperature at or above its threshold
    MEMORY_HOT = "memory_hot"  # the memory's temperature at or above its threshold


class GpuHealth(msgspec.Struct, frozen=True, gc=False):
    """A GPU's health facts from its newest sample (None: the GPU could not say); one
    object per GPU, replaced only when a fact changes (collector/fleet/health.py)."""

    temperature_celsius: float | None = None
    memory_temperature_celsius: float | None = None
    #: NVML clocks-event reasons bitmask (agent/model.py THROTTLE_REASONS)
    throttle_reasons: int | None = None
    #: the power and thermal reasons of ``throttle_reasons``, by THROTTLE_REASONS name
    throttled_by: tuple[str, ...] = ()
    #: volatile uncorrected ECC errors since driver load
    ecc_uncorrected_total: int | None = None
    remapped_rows_pending: bool | None = None
    #: what of these facts is a problem, in the enum's order
    problems: tuple[HealthProblem, ...] = ()


class XidSeen(msgspec.Struct, frozen=True, gc=False):
    """An XID code a GPU reported within the recent window, last at ``last_seen``."""

    code: int
    last_seen: float


class GpuView(msgspec.Struct, frozen=True, gc=False):
    """One GPU (or MIG instance) as the fleet sees it now; built by fleet.py, read by
    recommend.py, the API and the exporter.

    A frozen msgspec Struct, not a frozen dataclass: every read of the fleet (a /metrics
    render, the rates, the recommender, the API) builds one per GPU, and a frozen
    dataclass's ``__init__`` sets each of the 19 fields through ``object.__setattr__``:
    ~17 ms of a /metrics render at 10,000 GPUs (bench/collector_metrics.py). It refers to
    nothing that could refer back to it, so the cyclic GC need not track it."""

    uuid: str
    node: str
    index: int
    model: str  # canonical price-book model, e.g. "H100"
    name: str  # NVML name, e.g. "NVIDIA H100 80GB HBM3"
    state: GpuState
    last_seen: float | None
    workloads: tuple[WorkloadRef, ...] = ()
    #: start of the current idle episode, None when not idle
    idle_since: float | None = None
    sm_activity: float | None = None
    dram_activity: float | None = None
    power_watts: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    mig_parent_uuid: str | None = None
    mig_profile: str | None = None
    healthy: bool = True
    #: the share of its model's price this GPU carries: 1 for a whole GPU, a MIG slice's
    #: share of its parent, a MIG parent's unpartitioned remainder (0 when fully split)
    price_fraction: float = 1.0
    #: True for a MIG-enabled physical GPU (its state comes from its slices)
    mig_enabled: bool = False
    #: a shared GPU: each holder's fraction of its price (analysis/shared.py), by
    #: workload key; empty when the GPU is not shared
    holder_fractions: dict[str, float] = msgspec.field(default_factory=dict)
    #: a shared GPU: the holders idle on their own now (their SM share below the idle
    #: threshold, the GPU busy or not), and since when, by workload key
    holders_idle_since: dict[str, float] = msgspec.field(default_factory=dict)
    #: the newest sample's health facts; None before any sample said one
    health: GpuHealth | None = None
    #: the XIDs seen within the recent window (health.XID_RECENT_SECONDS), newest first
    recent_xids: tuple[XidSeen, ...] = ()
    #: the problems now: the recent XIDs' and the facts'; empty when none
    problems: tuple[HealthProblem, ...] = ()

    def idle_seconds(self, now: float) -> float:
        return 0.0 if self.idle_since is None else max(0.0, now - self.idle_since)


@dataclass(frozen=True, slots=True)
class WorkloadProfile:
    """What a workload needed over its observed life, for right-sizing."""

    workload: WorkloadRef
    gpu_model: str
    gpu_count: int
    observed_seconds: float
    memory_p95_bytes: int
    memory_peak_bytes: int
    sm_activity_peak: float
    sm_activity_p95: float


@dataclass(frozen=True, slots=True)
class ModelUsage:
    """A GPU model's use on one node over the pricing look-back window, for pricing-plan
    advice (per node, because a node's price-book override may set its own prices and
    plan)."""

    model: str
    node: str
    gpu_count: int
    observed_seconds: float  # GPU-seconds with known data
    allocated_seconds: float  # GPU-seconds held by a workload
    active_seconds: float


@dataclass(frozen=True, slots=True)
class ModelHour:
    """A GPU model's use on one node in one hour (physical GPUs), for the reserved
    baseline: allocated / 3600 is the mean number of GPUs allocated in that hour."""

    model: str
    node: str
    hour_start: float
    allocated_seconds: float  # GPU-seconds active or held by a workload
    active_seconds: float
