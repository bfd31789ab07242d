"""The recommender: on its own schedule, what the fleet should change now, reconciled with
what the ledger holds.

It reads the live fleet, the ledger's profiles and usage, and the rates in force; it
writes only recommendations. Evaluation runs at most every
``analysis.evaluation_interval_seconds`` of event time (``evaluate_if_due``), or when
asked (``evaluate``: a demo's last step, tests).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from collector.accounting.rates import Rates
from collector.analysis.work_window import WorkloadWindow
from collector.config import AnalysisSettings
from collector.ledger.store import Ledger
from collector.recommend.lifecycle import evaluate, reconcile
from collector.recommend.rules import RecommendPolicy
from collector.records import HOUR_SECONDS, GpuView, ModelHour, ModelUsage, Recommendation


class FleetReads(Protocol):
    """What the recommender reads of the live fleet (a ``LiveFleet``, or a replica's view
    of the whole fleet: collector/replica_core.py)."""

    def views(self, now: float) -> list[GpuView]: ...
    def node_labels(self) -> dict[str, dict[str, str]]: ...
    def workload_windows(self, now: float) -> list[WorkloadWindow]: ...


class Recommender:
    def __init__(
        self,
        fleet: FleetReads,
        ledger: Ledger,
        rates: Rates,
        analysis: AnalysisSettings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.fleet = fleet
        self.ledger = ledger
        self.rates = rates
        self.analysis = analysis
        self.clock = clock
        self.policy = RecommendPolicy.default()
        self._evaluated_at: float | None = None
        #: the pricing look-back's usage, read again once the hour (or the clock) moves:
        #: the curve is hourly and a 30-day read every evaluation would be wasted work
        self._pricing: tuple[float, list[ModelUsage], list[ModelHour]] | None = None

    def evaluate_if_due(self, now: float | None = None) -> list[Recommendation]:
        """Re-evaluate when an evaluation interval has passed (event time); the changes."""
        at = self.clock() if now is None else now
        interval = self.analysis.evaluation_interval_seconds
        if self._evaluated_at is not None and at - self._evaluated_at < interval:
            return []
        return self.evaluate(at)

    def evaluate(self, now: float) -> list[Recommendation]:
        """Compute the desired recommendations, reconcile with the stored ones, store the
        changes; returns them."""
        analysis, ledger = self.analysis, self.ledger
        models, hours = self._pricing_usage(now)
        stored = ledger.recommendations(None)
        labels = self.fleet.node_labels()
        desired = evaluate(
            self.fleet.views(now),
            ledger.workload_profiles(now),
            models,
            self.rates.prices,
            self.rates.carbon_context(labels, now),
            analysis,
            now,
            self.policy,
            hours=hours,
            standing=stored,
            windows=self.fleet.workload_windows(now),
            node_labels=labels,
        )
        changed = reconcile(stored, desired, now, analysis.resolve_after_seconds)
        if changed:
            ledger.upsert_recommendations(changed)
        self._evaluated_at = now
        return changed

    def _pricing_usage(self, now: float) -> tuple[list[ModelUsage], list[ModelHour]]:
        hour = now // HOUR_SECONDS
        if self._pricing is None or self._pricing[0] != hour:
            start = now - self.analysis.pricing_lookback_seconds
            ledger = self.ledger
            self._pricing = (hour, ledger.model_usage(start, now), ledger.model_hours(start, now))
        return self._pricing[1], self._pricing[2]
