"""What the releases of the last 7 days freed, on /metrics: ``catalogue.SAVINGS``, from the
same report as ``GET /v1/savings`` and ``gpufleet report --savings``, built at most every
five minutes (a scrape every 15 s would read the same episodes again)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from prometheus_client.metrics_core import Metric

from collector.metrics import catalogue as cat
from collector.metrics.families import family, filled
from collector.records import HOUR_SECONDS
from collector.savings_report import SavingsReport

log = logging.getLogger(__name__)
WINDOW_SECONDS = 7 * 86400.0
REFRESH_SECONDS = 300.0


class SavingsExporter:
    """A prometheus_client Collector of ``catalogue.SAVINGS``; ``report(start, end)`` is
    the savings report over a period."""

    def __init__(
        self, report: Callable[[float, float], SavingsReport], clock: Callable[[], float]
    ) -> None:
        self._report = report
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: tuple[float, list[Metric]] | None = None

    def describe(self) -> Iterable[Metric]:
        return [family(spec) for spec in cat.SAVINGS]

    def collect(self) -> Iterable[Metric]:
        now = self._clock()
        with self._lock:
            if self._cached is None or now - self._cached[0] >= REFRESH_SECONDS:
                try:
                    report = self._report(now - WINDOW_SECONDS, now)
                except Exception:  # one failing part must not fail the scrape
                    log.exception("savings exporter: report failed; left out of this scrape")
                    return []
                self._cached = (now, savings_families(report))
            return list(self._cached[1])


def savings_families(report: SavingsReport) -> list[Metric]:
    by: dict[tuple[str, ...], float] = {("auto",): 0.0, ("chat",): 0.0}
    for r in report.releases:
        by[(r.by,)] = by.get((r.by,), 0.0) + 1
    return [
        filled(cat.SAVINGS_FREED, {(): report.released_gpu_hours * HOUR_SECONDS}),
        filled(cat.SAVINGS_MONEY, {(report.currency,): report.money}),
        filled(cat.SAVINGS_ENERGY, {(): report.energy_kwh * 3.6e6}),
        filled(cat.SAVINGS_RELEASES, by),
    ]
