"""The metadata reader's own counters on /metrics, built fresh on every scrape."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from prometheus_client.metrics_core import Metric

from collector.kube.claims import CLAIM
from collector.kube.store import MetadataStore
from collector.metrics import catalogue as cat
from collector.metrics.families import family, filled


class Counts(Protocol):
    @property
    def lists(self) -> int: ...
    @property
    def relists_after_gone(self) -> int: ...
    @property
    def failures(self) -> int: ...


class Watched(Protocol):
    """One resource's watch (collector/kube/watcher.py ResourceWatch)."""

    @property
    def resource(self) -> str: ...
    @property
    def stats(self) -> Counts: ...


class KubeReaderMetrics:
    def __init__(self, store: MetadataStore, watches: Sequence[Watched]) -> None:
        """``watches``: the reader's list, read at each scrape (DRA's join it later)."""
        self._store, self._watches = store, watches

    def describe(self) -> Iterable[Metric]:
        return [family(spec) for spec in cat.KUBE]

    def collect(self) -> Iterable[Metric]:
        watches = list(self._watches)
        dropped = {**self._store.dropped, CLAIM: self._store.claims_dropped}
        return [
            filled(cat.KUBE_OBJECTS, {(r,): float(n) for r, n in self._store.counts().items()}),
            filled(cat.KUBE_DROPPED, {(r,): float(n) for r, n in dropped.items()}),
            filled(cat.KUBE_LISTS, {(w.resource,): float(w.stats.lists) for w in watches}),
            filled(
                cat.KUBE_GONE,
                {(w.resource,): float(w.stats.relists_after_gone) for w in watches},
            ),
            filled(cat.KUBE_FAILURES, {(w.resource,): float(w.stats.failures) for w in watches}),
        ]
