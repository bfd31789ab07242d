"""The plans' what-if costs on /metrics: ``catalogue.PLANS``, from the same report as
``gpufleet report --plans`` over the pricing look-back, built at most once an hour (the
ledger's rollups are hourly; a 30-day read every scrape would be wasted work)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from prometheus_client.metrics_core import Metric

from collector.metrics import catalogue as cat
from collector.metrics.families import Labels, family, filled
from collector.plans_report import SCENARIOS, PlansReport
from collector.records import HOUR_SECONDS, MONTH_HOURS

log = logging.getLogger(__name__)


class PlansExporter:
    """A prometheus_client Collector of ``catalogue.PLANS``; ``report(start, end)`` is the
    plans report over a period, ``lookback_seconds`` the period before now."""

    def __init__(
        self,
        report: Callable[[float, float], PlansReport],
        lookback_seconds: float,
        target_ratio: float,
        clock: Callable[[], float],
    ) -> None:
        self._report = report
        self._lookback = lookback_seconds
        self._target = target_ratio
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: tuple[float, list[Metric]] | None = None

    def describe(self) -> Iterable[Metric]:
        return [family(spec) for spec in cat.PLANS]

    def collect(self) -> Iterable[Metric]:
        target = filled(cat.UTILISATION_TARGET, {(): self._target})
        now = self._clock()
        hour = now // HOUR_SECONDS
        with self._lock:
            if self._cached is None or self._cached[0] != hour:
                try:
                    report = self._report(now - self._lookback, now)
                except Exception:  # one failing part must not fail the scrape
                    log.exception("plans exporter: report failed; leaving it out of this scrape")
                    return [target]
                self._cached = (hour, plans_families(report))
            return [*self._cached[1], target]


def plans_families(report: PlansReport) -> list[Metric]:
    """Per pool: each scenario's cost per month, and the GPUs reserved today and advised."""
    costs: dict[Labels, float] = {}
    reserved: dict[Labels, float] = {}
    for row in report.rows:
        month = MONTH_HOURS / row.hours if row.hours else 0.0
        for scenario in SCENARIOS:
            costs[(report.currency, row.subject, scenario)] = getattr(row.costs, scenario) * month
        for scenario, mix in (("today", row.today), ("recommended", row.recommended)):
            if mix.reserved_gpus:
                reserved[(row.subject, mix.plan, scenario)] = float(mix.reserved_gpus)
    return [filled(cat.PLAN_COST, costs), filled(cat.PLAN_RESERVED_GPUS, reserved)]
