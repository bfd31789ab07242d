"""The collector's Prometheus collectors, over a CollectorBackend and a RatesSource.

**Who exports what.** The agent on each node exports every per-GPU reading (power, energy,
activity, memory, clocks, temperatures, errors: agent/metrics/catalogue.py); the collector
does not repeat any of them. It exports what only it knows: the fleet (GPUs by state and
model, utilisation, power), per workload / namespace / team / model totals (idle, waste,
energy, carbon), recommendations, the rates in force (waste per hour, PUE, intensity), per
node clock offsets, and its own health. Two families stay per GPU because they are the
collector's judgement, which no agent can make: ``gpufleet_gpu_state`` (active,
allocated-idle, unallocated, unknown: idle threshold over SM and DRAM activity, staleness,
who holds the GPU) and ``gpufleet_gpu_idle_seconds`` (since when the idle episode runs);
the fleet dashboard's idle-workload table and the ``GpuAllocatedIdle`` / ``GpuDataStale``
rules read them. tests/collector/metrics/test_ownership.py checks that the two catalogues
share no name.

**When it renders** (collector/metrics/cache.py). ``FleetExporter`` and ``RatesExporter``
change when samples are applied (``Refresh.APPLY``), ``WorkloadExporter`` only at a ledger
commit (``Refresh.COMMIT``): their exposition is rendered once per change and served from
the cache; the totals ``WorkloadExporter`` reads are kept in memory and advanced by each
commit (collector/running_totals.py), so its re-render reads no SQL. ``SelfExporter``
(ingest counters, last ingest, export errors) is rendered on every scrape, from memory.

Every family and label set comes from collector/metrics/catalogue.py. A backend call that
fails drops its part, logs, and counts in ``gpufleet_collector_export_errors_total{part}``;
the rest still answers.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable

from prometheus_client.metrics_core import Metric

from collector.backend import CollectorBackend, RatesSource
from collector.metrics import catalogue as cat
from collector.metrics.cache import Refresh
from collector.metrics.families import Family
from collector.metrics.families import family as family
from collector.metrics.families import filled as filled
from collector.metrics.fleet_families import (
    DEFAULT_INFO_LABELS,
    PodLabelValues,
    fleet_families,
    health_families,
    ingest_families,
    rates_families,
    recommendation_families,
    workload_families,
)
from collector.metrics.replica_scope import MetricScope, scoped_fleet_families
from collector.metrics.verdicts import verdict_families
from collector.records import OPEN_STATUSES, GpuView, Recommendation
from gpufleet.metric_spec import MetricSpec

log = logging.getLogger(__name__)

#: the parts of FleetExporter and WorkloadExporter, and the families of each
FLEET_SPECS = (
    cat.FLEET_GPUS, cat.FLEET_UTILISATION, cat.FLEET_POWER, cat.GPU_STATE, cat.GPU_IDLE,
    cat.RECOMMENDATIONS_OPEN, cat.RECOMMENDATION_SAVINGS, cat.RECOMMENDATION_SAVINGS_LOW,
    *cat.VERDICTS, cat.PENDING_SAMPLES, cat.LAG, cat.NODE_CLOCK_OFFSET, cat.LEDGER_UP,
    *cat.WRITE_PATH,
)  # fmt: skip
WORKLOAD_SPECS = (
    cat.WORKLOAD_IDLE, cat.WORKLOAD_WASTE, cat.WORKLOAD_ENERGY, cat.WORKLOAD_ESTIMATED_ENERGY,
    cat.WORKLOAD_CARBON, cat.WORKLOAD_INFO,
)  # fmt: skip
SELF_SPECS = (
    cat.BATCHES, cat.REJECTED_BATCHES, cat.SAMPLES, cat.REJECTED_SAMPLES, cat.LATE_SAMPLES,
    cat.IMPLAUSIBLE_SAMPLES, cat.INGEST_SECONDS, cat.INTAKE_CORRUPT_RECORDS, cat.LAST_INGEST,
    cat.EXPORT_ERRORS,
)  # fmt: skip


class ExportErrors:
    """Parts left out of a scrape because the backend failed, by part (thread-safe)."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def guarded(self, part: str, build: Callable[[], list[Family]]) -> list[Family]:
        try:
            return build()
        except Exception:  # one failing part must not fail the scrape
            log.exception("collector exporter: %s failed; leaving it out of this scrape", part)
            with self._lock:
                self._counts[part] += 1
            return []

    def family(self) -> Family:
        with self._lock:
            return Family(
                cat.EXPORT_ERRORS, {(part,): float(n) for part, n in self._counts.items()}
            )


class _Families:
    """A prometheus_client Collector over ``families()``: empty families to describe (so
    registering does not call the backend), the filled ones to collect."""

    specs: tuple[MetricSpec, ...] = ()

    def families(self) -> list[Family]:
        raise NotImplementedError

    def describe(self) -> Iterable[Metric]:
        return [family(spec) for spec in self.specs]

    def collect(self) -> Iterable[Metric]:
        return [filled(f.spec, f.values) for f in self.families()]


class FleetExporter(_Families):
    """GPUs by state, per-GPU state and idle time, recommendations, health, write path."""

    refresh = Refresh.APPLY
    specs = FLEET_SPECS

    def __init__(
        self,
        backend: CollectorBackend,
        clock: Callable[[], float],
        errors: ExportErrors,
        views: Callable[[float], list[GpuView]] | None = None,
        scope: MetricScope | None = None,
    ) -> None:
        """``views``: the fleet at ``now`` (default ``backend.fleet``; the exposition's
        ``once_per_render`` of it shares one call with the rates). ``scope``: a replica's
        (collector/metrics/replica_scope.py); None: one collector, everything."""
        self._backend, self._clock, self._errors = backend, clock, errors
        self._views = views or backend.fleet
        self._scope = scope

    def families(self) -> list[Family]:
        now, backend, guarded = self._clock(), self._backend, self._errors.guarded
        scope = self._scope
        if scope is not None:
            return [
                *guarded("fleet", lambda: scoped_fleet_families(scope, self._views, now)),
                *(
                    guarded(
                        "recommendations",
                        lambda: _recommendation_parts(backend.recommendations(OPEN_STATUSES)),
                    )
                    if scope.leads()
                    else []
                ),
                *guarded("health", lambda: health_families(backend.health(), now)),
            ]
        return [
            *guarded("fleet", lambda: fleet_families(self._views(now), now)),
            *guarded(
                "recommendations",
                lambda: _recommendation_parts(backend.recommendations(OPEN_STATUSES)),
            ),
            *guarded("health", lambda: health_families(backend.health(), now)),
        ]


def _recommendation_parts(recommendations: list[Recommendation]) -> list[Family]:
    """Counts and savings by kind, and why the GPUs waste (collector/metrics/verdicts.py)."""
    return [*recommendation_families(recommendations), *verdict_families(recommendations)]


class WorkloadExporter(_Families):
    """Per-workload idle, waste, energy and carbon counters: they change at commits only."""

    refresh = Refresh.COMMIT
    specs = WORKLOAD_SPECS

    def __init__(
        self,
        backend: CollectorBackend,
        clock: Callable[[], float],
        errors: ExportErrors,
        info_labels: Collection[str] = DEFAULT_INFO_LABELS,
        scope: MetricScope | None = None,
        pod_labels: PodLabelValues | None = None,
    ) -> None:
        """``info_labels``: the attributes gpufleet_workload_info carries
        (kubernetes.metric_labels); ``scope``: a replica's; its per-workload totals come
        from the leader only; ``pod_labels``: the pod labels gpufleet_workload_info
        carries too (kubernetes.pod_labels, as the enricher recorded them)."""
        self._backend, self._clock, self._errors = backend, clock, errors
        self._info_labels, self._pod_labels = info_labels, pod_labels
        self._scope = scope

    def families(self) -> list[Family]:
        if self._scope is not None and not self._scope.leads():
            return []
        return self._errors.guarded("totals", self._workload_families)

    def _workload_families(self) -> list[Family]:
        totals = self._backend.fleet_totals()
        return workload_families(totals, self._clock(), self._info_labels, self._pod_labels)


class SelfExporter(_Families):
    """Ingest counters, damaged intake records, the last ingest and export errors: from
    memory, on every scrape."""

    specs = SELF_SPECS

    def __init__(self, backend: CollectorBackend, errors: ExportErrors) -> None:
        self._backend, self._errors = backend, errors

    def families(self) -> list[Family]:
        ingest = self._errors.guarded("ingest", self._ingest_families)
        return [*ingest, self._errors.family()]

    def _ingest_families(self) -> list[Family]:
        return ingest_families(self._backend.ingest_report())


def backend_exporters(
    backend: CollectorBackend,
    clock: Callable[[], float],
    views: Callable[[float], list[GpuView]] | None = None,
    info_labels: Collection[str] = DEFAULT_INFO_LABELS,
    scope: MetricScope | None = None,
    pod_labels: PodLabelValues | None = None,
) -> tuple[FleetExporter, WorkloadExporter, SelfExporter]:
    """The three collectors over one backend, sharing one export-error tally; ``views``
    and ``scope`` as FleetExporter takes them, ``info_labels`` and ``pod_labels`` as
    WorkloadExporter does."""
    errors = ExportErrors()
    return (
        FleetExporter(backend, clock, errors, views, scope),
        WorkloadExporter(backend, clock, errors, info_labels, scope, pod_labels),
        SelfExporter(backend, errors),
    )


class RatesExporter(_Families):
    """``catalogue.RATES`` over a RatesSource; register it next to FleetExporter. A failing
    source leaves the rates out (logged) until the next refresh."""

    refresh = Refresh.APPLY
    specs = cat.RATES

    def __init__(self, source: RatesSource, clock: Callable[[], float]) -> None:
        self._source = source
        self._clock = clock

    def families(self) -> list[Family]:
        try:
            rates = self._source.fleet_rates(self._clock())
        except Exception:  # one failing part must not fail the scrape
            log.exception("collector exporter: rates failed; leaving them out of this scrape")
            return []
        return rates_families(rates)
