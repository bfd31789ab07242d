"""The collector's Prometheus collectors: fleet state, per-workload totals, ingest health
(``FleetExporter``), and the rates in force now (``RatesExporter``: waste per hour, PUE,
grid intensity), which need the price book and carbon settings the edge does not see.

Families are built fresh from the backend on every scrape (nothing to delete when a GPU
or workload vanishes); every family and label set comes from collector/metrics/catalogue.py.
A backend call that fails drops its part of the scrape, logs, and counts in
``gpufleet_collector_export_errors_total{part}``; the rest of the scrape still answers.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from agent.model import primary_rank
from collector.backend import (
    CollectorBackend,
    FleetRates,
    FleetTotals,
    HealthReport,
    ImplausibleField,
    LateReason,
    RatesSource,
    RejectReason,
    summarise_fleet,
)
from collector.health import FailureReason, WritePath
from collector.metrics import catalogue as cat
from collector.records import (
    OPEN_STATUSES,
    GpuState,
    GpuView,
    Recommendation,
    RecommendationKind,
    WorkloadRef,
)
from gpufleet.metric_spec import MetricSpec

log = logging.getLogger(__name__)

#: a workload's counters leave /metrics this long after it last held a GPU
WORKLOAD_SERIES_TTL_SECONDS = 3600.0

Labels = tuple[str, ...]


def family(spec: MetricSpec) -> CounterMetricFamily | GaugeMetricFamily:
    """An empty family for ``spec``, with its help, labels and unit."""
    if spec.type == "counter":
        return CounterMetricFamily(spec.name, spec.help, labels=spec.labels, unit=spec.unit)
    return GaugeMetricFamily(spec.name, spec.help, labels=spec.labels, unit=spec.unit)


def filled(spec: MetricSpec, values: dict[Labels, float]) -> Metric:
    """A family of ``spec`` with one sample per label tuple, in sorted label order."""
    metric = family(spec)
    for labels in sorted(values):
        metric.add_metric(list(labels), values[labels])
    return metric


class FleetExporter:
    """A prometheus_client Collector over a CollectorBackend; register it on a registry."""

    def __init__(self, backend: CollectorBackend, clock: Callable[[], float]) -> None:
        self._backend = backend
        self._clock = clock
        self._errors: Counter[str] = Counter()
        self._lock = threading.Lock()

    def describe(self) -> Iterable[Metric]:
        """Empty families, so registering does not call the backend."""
        others = {
            *cat.RATES,
            *cat.NOTIFY,
            *cat.INFLUX,
            *cat.AUTH,
            *cat.ADMISSION,
            *cat.PLANS,
        }  # described by their own collectors
        return [family(spec) for spec in cat.CATALOGUE if spec not in others]

    def collect(self) -> Iterable[Metric]:
        now = self._clock()
        parts: dict[str, Callable[[], list[Metric]]] = {
            "fleet": lambda: fleet_families(self._backend.fleet(now), now),
            "totals": lambda: totals_families(self._backend.fleet_totals(), now),
            "recommendations": lambda: recommendation_families(
                self._backend.recommendations(OPEN_STATUSES)
            ),
            "health": lambda: health_families(self._backend.health(), now),
        }
        for part, build in parts.items():
            yield from self._guarded(part, build)
        with self._lock:
            errors: dict[Labels, float] = {
                (part,): float(count) for part, count in self._errors.items()
            }
        yield filled(cat.EXPORT_ERRORS, errors)

    def _guarded(self, part: str, build: Callable[[], list[Metric]]) -> list[Metric]:
        try:
            return build()
        except Exception:  # one failing part must not fail the scrape
            log.exception("collector exporter: %s failed; leaving it out of this scrape", part)
            with self._lock:
                self._errors[part] += 1
            return []


class RatesExporter:
    """A prometheus_client Collector of ``catalogue.RATES`` over a RatesSource; register it
    next to FleetExporter. A failing source leaves the rates out of that scrape (logged)."""

    def __init__(self, source: RatesSource, clock: Callable[[], float]) -> None:
        self._source = source
        self._clock = clock

    def describe(self) -> Iterable[Metric]:
        return [family(spec) for spec in cat.RATES]

    def collect(self) -> Iterable[Metric]:
        try:
            rates = self._source.fleet_rates(self._clock())
        except Exception:  # one failing part must not fail the scrape
            log.exception("collector exporter: rates failed; leaving them out of this scrape")
            return []
        return rates_families(rates)


def rates_families(rates: FleetRates) -> list[Metric]:
    """Waste now in the price book's currency, the PUE, the grid intensity per region."""
    intensity: dict[Labels, float] = {
        (region,): grams for region, grams in rates.intensity_g_per_kwh.items()
    }
    return [
        filled(cat.FLEET_IDLE_COST, {(rates.currency,): rates.idle_cost_per_hour}),
        filled(cat.CARBON_PUE, {(): rates.pue_ratio}),
        filled(cat.CARBON_INTENSITY, intensity),
    ]


def fleet_families(views: Sequence[GpuView], now: float) -> list[Metric]:
    """GPUs by state and model, fleet utilisation and power, one state/idle series per GPU."""
    by_state: dict[Labels, float] = {}
    for model in {view.model for view in views}:
        for state in GpuState:
            by_state[(state.value, model)] = 0.0
    states: dict[Labels, float] = {}
    idle: dict[Labels, float] = {}
    for view in views:
        by_state[(view.state.value, view.model)] += 1
        labels = gpu_labels(view)
        states[(*labels, view.state.value)] = 1.0
        idle[labels] = view.idle_seconds(now)
    metrics = [filled(cat.FLEET_GPUS, by_state)]
    metrics += _fleet_gauges(views)
    return [*metrics, filled(cat.GPU_STATE, states), filled(cat.GPU_IDLE, idle)]


def _fleet_gauges(views: Sequence[GpuView]) -> list[Metric]:
    summary = summarise_fleet(views)
    ratio = summary.utilisation_ratio
    utilisation: dict[Labels, float] = {(): ratio} if ratio is not None else {}
    power: dict[Labels, float] = {(): summary.power_watts}
    return [filled(cat.FLEET_UTILISATION, utilisation), filled(cat.FLEET_POWER, power)]


def gpu_labels(view: GpuView) -> Labels:
    """The GPU_LABELS values: identity, then the primary workload's namespace and key."""
    holder = primary_workload(view.workloads)
    namespace = holder.namespace if holder else ""
    key = holder.key if holder else ""
    return (view.node, str(view.index), view.uuid, view.model, namespace, key)


def primary_workload(workloads: Sequence[WorkloadRef]) -> WorkloadRef | None:
    """The workload a GPU series is labelled with: a pod first, then a Slurm job, a manual
    label, a bare process (the agent's rule); ties broken by key."""
    if not workloads:
        return None
    return min(workloads, key=lambda w: primary_rank(w.kind, w.key))


def totals_families(totals: FleetTotals, now: float) -> list[Metric]:
    """Per-workload idle, waste, energy and carbon counters, and the ingest counters.

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
        filled(cat.WORKLOAD_IDLE, idle),
        filled(cat.WORKLOAD_WASTE, waste),
        filled(cat.WORKLOAD_ENERGY, energy),
        filled(cat.WORKLOAD_ESTIMATED_ENERGY, estimated),
        filled(cat.WORKLOAD_CARBON, carbon),
        *ingest_families(totals),
    ]


def ingest_families(totals: FleetTotals) -> list[Metric]:
    """Ingest counters; every result and reason appears, at 0 until it happens."""
    counters = totals.ingest
    rejected = _by_reason(counters.batches_rejected)
    batches: dict[Labels, float] = {
        ("accepted",): float(counters.batches_accepted),
        ("duplicate",): float(counters.batches_duplicate),
        ("rejected",): sum(rejected.values()),
    }
    return [
        filled(cat.BATCHES, batches),
        filled(cat.REJECTED_BATCHES, rejected),
        filled(cat.SAMPLES, {(): float(counters.samples_accepted)}),
        filled(cat.REJECTED_SAMPLES, _by_reason(counters.samples_rejected)),
        filled(cat.LATE_SAMPLES, _all_of(LateReason, counters.late_samples_by_reason)),
        filled(cat.IMPLAUSIBLE_SAMPLES, _all_of(ImplausibleField, counters.implausible_samples)),
        filled(cat.INGEST_SECONDS, {(): counters.ingest_seconds}),
        filled(cat.INTAKE_CORRUPT_RECORDS, {(): float(totals.intake_corrupt_records)}),
    ]


def _all_of(kinds: type[enum.StrEnum], counts: dict[str, int]) -> dict[Labels, float]:
    """Each of ``kinds`` as a label value, at 0 until counted."""
    return {(kind.value,): float(counts.get(kind.value, 0)) for kind in kinds}


def _by_reason(counts: dict[str, int]) -> dict[Labels, float]:
    values: dict[Labels, float] = {(reason.value,): 0.0 for reason in RejectReason}
    for reason, count in counts.items():
        values[(reason,)] = values.get((reason,), 0.0) + count
    return values


def recommendation_families(recommendations: Sequence[Recommendation]) -> list[Metric]:
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
        filled(cat.RECOMMENDATIONS_OPEN, count),
        filled(cat.RECOMMENDATION_SAVINGS, savings),
        filled(cat.RECOMMENDATION_SAVINGS_LOW, low),
    ]


def health_families(health: HealthReport, now: float) -> list[Metric]:
    """Last ingest time, pending samples, lag, whether the ledger works, the write path."""
    last: dict[Labels, float] = (
        {(): health.last_ingest_at} if health.last_ingest_at is not None else {}
    )
    return [
        filled(cat.LAST_INGEST, last),
        filled(cat.PENDING_SAMPLES, {(): float(health.pending_samples)}),
        filled(cat.LAG, {(): health.lag_seconds}),
        filled(cat.NODE_CLOCK_OFFSET, {(n,): o for n, o in health.clock_offsets.items()}),
        filled(cat.LEDGER_UP, {(): 1.0 if health.ledger_ok else 0.0}),
        filled(cat.READY, {(): 1.0 if health.ready else 0.0}),
        *write_path_families(health.write_path, now),
    ]


def write_path_families(path: WritePath, now: float) -> list[Metric]:
    """Commits, intake failures (every reason, 0 until it happens), backlog, quarantine."""
    last: dict[Labels, float] = {(): path.last_commit_at} if path.last_commit_at else {}
    oldest = path.oldest_pending_at
    return [
        filled(cat.LAST_COMMIT, last),
        filled(cat.COMMIT_FAILURES, _by_failure(path.commit_failures)),
        filled(cat.INTAKE_FAILURES, _by_failure(path.intake_failures)),
        filled(cat.INTAKE_BACKLOG_BATCHES, {(): float(path.backlog_batches)}),
        filled(cat.INTAKE_BACKLOG_BYTES, {(): float(path.backlog_bytes)}),
        filled(cat.INTAKE_OLDEST_AGE, {(): max(now - oldest, 0.0) if oldest else 0.0}),
        filled(cat.QUARANTINED, {(): float(path.quarantined_batches)}),
    ]


def _by_failure(counts: dict[str, int]) -> dict[Labels, float]:
    values: dict[Labels, float] = {(reason.value,): 0.0 for reason in FailureReason}
    values.update({(reason,): float(n) for reason, n in counts.items()})
    return values
