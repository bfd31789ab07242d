"""The collector's families as pure functions of what the backend answers: fleet and
per-GPU state, per-workload totals, ingest counters, recommendations, health and the write
path, the rates in force. collector/metrics/exporter.py's collectors call them; every row
comes from collector/metrics/catalogue.py.
"""

from __future__ import annotations

import dataclasses
import enum
from collections import defaultdict
from collections.abc import Collection, Sequence
from typing import Protocol

from agent.model import primary_rank
from collector.backend import (
    FleetRates,
    FleetTotals,
    HealthReport,
    ImplausibleField,
    IngestReport,
    LateReason,
    RejectReason,
    summarise_fleet,
)
from collector.health import FailureReason, WritePath
from collector.metrics import catalogue as cat
from collector.metrics.families import Family, Labels
from collector.records import (
    OPEN_STATUSES,
    GpuState,
    GpuView,
    Recommendation,
    RecommendationKind,
    WorkloadRef,
)
from gpufleet.metric_spec import MetricSpec

#: a workload's counters leave /metrics this long after it last held a GPU
WORKLOAD_SERIES_TTL_SECONDS = 3600.0


def rates_families(rates: FleetRates) -> list[Family]:
    """Waste now in the price book's currency, the PUE, the grid intensity per region."""
    intensity: dict[Labels, float] = {
        (region,): grams for region, grams in rates.intensity_g_per_kwh.items()
    }
    return [
        Family(cat.FLEET_IDLE_COST, {(rates.currency,): rates.idle_cost_per_hour}),
        Family(cat.CARBON_PUE, {(): rates.pue_ratio}),
        Family(cat.CARBON_INTENSITY, intensity),
    ]


def fleet_families(views: Sequence[GpuView], now: float) -> list[Family]:
    """GPUs by state and model, fleet utilisation and power, one state/idle series per GPU."""
    by_state: dict[Labels, float] = {}
    for model in {view.model for view in views}:
        for state in GpuState:
            by_state[(state.value, model)] = 0.0
    states: dict[Labels, float] = {}
    idle: dict[Labels, float] = {}
    for view in views:
        state_name = view.state.value
        by_state[(state_name, view.model)] += 1
        labels = gpu_labels(view)
        states[(*labels, state_name)] = 1.0
        idle[labels] = view.idle_seconds(now)
    metrics = [Family(cat.FLEET_GPUS, by_state)]
    metrics += _fleet_gauges(views)
    return [*metrics, Family(cat.GPU_STATE, states), Family(cat.GPU_IDLE, idle)]


def _fleet_gauges(views: Sequence[GpuView]) -> list[Family]:
    summary = summarise_fleet(views)
    ratio = summary.utilisation_ratio
    utilisation: dict[Labels, float] = {(): ratio} if ratio is not None else {}
    power: dict[Labels, float] = {(): summary.power_watts}
    return [Family(cat.FLEET_UTILISATION, utilisation), Family(cat.FLEET_POWER, power)]


def gpu_labels(view: GpuView) -> Labels:
    """The GPU_LABELS values: identity, then the primary workload's namespace and key."""
    holder = primary_workload(view.workloads)
    namespace = holder.namespace if holder else ""
    key = holder.key if holder else ""
    return (view.node, str(view.index), view.uuid, view.model, namespace, key)


def primary_workload(workloads: Sequence[WorkloadRef]) -> WorkloadRef | None:
    """The workload a GPU series is labelled with: a pod first, then a Slurm job, a manual
    label, a bare process (the agent's rule); ties broken by key."""
    if len(workloads) < 2:  # most GPUs: one holder or none
        return workloads[0] if workloads else None
    return min(workloads, key=lambda w: primary_rank(w.kind, w.key))


#: kubernetes.metric_labels' default (collector/kube/settings.py)
DEFAULT_INFO_LABELS = ("team", "owner_kind", "owner_name")


class PodLabelValues(Protocol):
    """Each workload's allowlisted pod labels (collector/kube/labels.py PodMetricLabels,
    ``kubernetes.pod_labels``): label names, and a workload key's values in their order."""

    @property
    def names(self) -> tuple[str, ...]: ...

    def values(self, workload: str) -> tuple[str, ...]: ...


def workload_families(
    totals: FleetTotals,
    now: float,
    info_labels: Collection[str] = DEFAULT_INFO_LABELS,
    pod_labels: PodLabelValues | None = None,
) -> list[Family]:
    """Per-workload idle, waste, energy and carbon counters, and the info series naming
    each workload's owner and team (the attributes in ``info_labels``; others empty) and
    its allowlisted pod labels (``pod_labels``, after the catalogue's labels).

    A workload's series go once it has held no GPU for ``WORKLOAD_SERIES_TTL_SECONDS``,
    as kube-state-metrics drops a deleted pod's: every pod or job ever run would otherwise
    stay a series of every scrape. Dashboards and rules read them with rate()/increase(),
    which count a series over its life; the ledger keeps the totals (``/v1/workloads``)."""
    cutoff = now - WORKLOAD_SERIES_TTL_SECONDS
    idle: dict[Labels, float] = defaultdict(float)
    waste: dict[Labels, float] = defaultdict(float)
    for row in totals.waste:
        if row.last_seen < cutoff:
            continue
        labels = (row.namespace, row.workload, row.team, row.model)
        idle[labels] += row.idle_gpu_seconds
        waste[(*labels, totals.currency)] += row.waste
    energy: dict[Labels, float] = defaultdict(float)
    estimated: dict[Labels, float] = defaultdict(float)
    carbon: dict[Labels, float] = defaultdict(float)
    for item in totals.energy:
        if item.last_seen < cutoff:
            continue
        key = (item.namespace, item.workload, item.team)
        energy[key] += item.energy_joules
        estimated[key] += item.estimated_energy_joules
        carbon[key] += item.carbon_grams
    return [
        Family(cat.WORKLOAD_IDLE, idle),
        Family(cat.WORKLOAD_WASTE, waste),
        Family(cat.WORKLOAD_ENERGY, energy),
        Family(cat.WORKLOAD_ESTIMATED_ENERGY, estimated),
        Family(cat.WORKLOAD_CARBON, carbon),
        Family(info_spec(pod_labels), workload_info(totals, cutoff, info_labels, pod_labels)),
    ]


def info_spec(pod_labels: PodLabelValues | None) -> MetricSpec:
    """gpufleet_workload_info's row, with the allowlisted pod labels' names after its own."""
    if pod_labels is None or not pod_labels.names:
        return cat.WORKLOAD_INFO
    labels = (*cat.WORKLOAD_INFO.labels, *pod_labels.names)
    return dataclasses.replace(cat.WORKLOAD_INFO, labels=labels)


def workload_info(
    totals: FleetTotals,
    cutoff: float,
    allowed: Collection[str],
    pod_labels: PodLabelValues | None = None,
) -> dict[Labels, float]:
    """1 per workload seen since ``cutoff``: (namespace, key, *WORKLOAD_INFO_LABELS, *pod
    label values), the attributes not ``allowed`` empty (Prometheus drops an empty label)."""
    extra = pod_labels.values if pod_labels is not None and pod_labels.names else None
    info: dict[Labels, float] = {}
    for item in totals.energy:
        if item.last_seen < cutoff or not item.workload:
            continue
        kind, _, rest = item.owner.partition("/")
        name = rest.rpartition("/")[2]
        values = {"team": item.team, "user": item.user, "owner_kind": kind, "owner_name": name,
                  "queue": item.queue, "priority_class": item.priority_class}  # fmt: skip
        attrs = tuple(values[k] if k in allowed else "" for k in cat.WORKLOAD_INFO_LABELS)
        if extra is not None:
            attrs += extra(item.workload)
        info[(item.namespace, item.workload, *attrs)] = 1.0
    return info


def ingest_families(report: IngestReport) -> list[Family]:
    """Ingest counters (every result and reason appears, at 0 until it happens), damaged
    intake records, when the last batch was accepted."""
    counters = report.counters
    last: dict[Labels, float] = (
        {(): report.last_ingest_at} if report.last_ingest_at is not None else {}
    )
    rejected = _by_reason(counters.batches_rejected)
    batches: dict[Labels, float] = {
        ("accepted",): float(counters.batches_accepted),
        ("duplicate",): float(counters.batches_duplicate),
        ("rejected",): sum(rejected.values()),
    }
    return [
        Family(cat.BATCHES, batches),
        Family(cat.REJECTED_BATCHES, rejected),
        Family(cat.SAMPLES, {(): float(counters.samples_accepted)}),
        Family(cat.REJECTED_SAMPLES, _by_reason(counters.samples_rejected)),
        Family(cat.LATE_SAMPLES, _all_of(LateReason, counters.late_samples_by_reason)),
        Family(cat.IMPLAUSIBLE_SAMPLES, _all_of(ImplausibleField, counters.implausible_samples)),
        Family(cat.INGEST_SECONDS, {(): counters.ingest_seconds}),
        Family(cat.INTAKE_CORRUPT_RECORDS, {(): float(report.intake_corrupt_records)}),
        Family(cat.LAST_INGEST, last),
    ]


def _all_of(kinds: type[enum.StrEnum], counts: dict[str, int]) -> dict[Labels, float]:
    """Each of ``kinds`` as a label value, at 0 until counted."""
    return {(kind.value,): float(counts.get(kind.value, 0)) for kind in kinds}


def _by_reason(counts: dict[str, int]) -> dict[Labels, float]:
    values: dict[Labels, float] = {(reason.value,): 0.0 for reason in RejectReason}
    for reason, count in counts.items():
        values[(reason,)] = values.get((reason,), 0.0) + count
    return values


def recommendation_families(recommendations: Sequence[Recommendation]) -> list[Family]:
    """Open (or notified) recommendations and the range of their summed monthly savings
    (if each lasts the month; if each lasts as long again as seen), by kind."""
    count: dict[Labels, float] = {(kind.value,): 0.0 for kind in RecommendationKind}
    savings: dict[Labels, float] = defaultdict(float)
    low: dict[Labels, float] = defaultdict(float)
    for rec in recommendations:
        if rec.status not in OPEN_STATUSES:
            continue
        count[(rec.kind.value,)] += 1
        savings[(rec.kind.value, rec.savings.currency)] += rec.savings.money_per_month
        low[(rec.kind.value, rec.savings.currency)] += rec.savings.money_per_month_low
    return [
        Family(cat.RECOMMENDATIONS_OPEN, count),
        Family(cat.RECOMMENDATION_SAVINGS, savings),
        Family(cat.RECOMMENDATION_SAVINGS_LOW, low),
    ]


def health_families(health: HealthReport, now: float) -> list[Family]:
    """Samples waiting for the reorder window, how far applying trails, each node's clock
    offset, whether the ledger works, readiness, the write path."""
    return [
        Family(cat.PENDING_SAMPLES, {(): float(health.pending_samples)}),
        Family(cat.LAG, {(): health.lag_seconds}),
        Family(cat.NODE_CLOCK_OFFSET, {(n,): o for n, o in health.clock_offsets.items()}),
        Family(cat.LEDGER_UP, {(): 1.0 if health.ledger_ok else 0.0}),
        Family(cat.READY, {(): 1.0 if health.ready else 0.0}),
        *write_path_families(health.write_path, now),
    ]


def write_path_families(path: WritePath, now: float) -> list[Family]:
    """Commits, intake failures (every reason, 0 until it happens), backlog, quarantine."""
    last: dict[Labels, float] = {(): path.last_commit_at} if path.last_commit_at else {}
    oldest = path.oldest_pending_at
    return [
        Family(cat.LAST_COMMIT, last),
        Family(cat.COMMIT_FAILURES, _by_failure(path.commit_failures)),
        Family(cat.INTAKE_FAILURES, _by_failure(path.intake_failures)),
        Family(cat.INTAKE_BACKLOG_BATCHES, {(): float(path.backlog_batches)}),
        Family(cat.INTAKE_BACKLOG_BYTES, {(): float(path.backlog_bytes)}),
        Family(cat.INTAKE_OLDEST_AGE, {(): max(now - oldest, 0.0) if oldest else 0.0}),
        Family(cat.QUARANTINED, {(): float(path.quarantined_batches)}),
    ]


def _by_failure(counts: dict[str, int]) -> dict[Labels, float]:
    values: dict[Labels, float] = {(reason.value,): 0.0 for reason in FailureReason}
    values.update({(reason,): float(n) for reason, n in counts.items()})
    return values
