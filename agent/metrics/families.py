"""prometheus_client families built from catalogue rows, fresh for every scrape."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)

from gpufleet.metric_spec import MetricSpec


def new_family(spec: MetricSpec) -> Metric:
    """An empty prometheus_client family for a catalogue row."""
    labels = list(spec.labels)
    if spec.type == "counter":
        return CounterMetricFamily(spec.name.removesuffix("_total"), spec.help, labels=labels)
    if spec.type == "info":
        return InfoMetricFamily(spec.name.removesuffix("_info"), spec.help, labels=labels)
    return GaugeMetricFamily(spec.name, spec.help, labels=labels)


class FamilySet:
    """Fresh families for one scrape, filled row by row; empty families are not emitted."""

    def __init__(self, specs: Sequence[MetricSpec]) -> None:
        self._specs = {spec.name: spec for spec in specs}
        self._families: dict[str, Metric] = {spec.name: new_family(spec) for spec in specs}
        self._seen: set[tuple[str, tuple[str, ...]]] = set()

    def add(self, name: str, label_values: Sequence[str], value: float) -> None:
        """Add one sample; ``label_values`` follow the row's ``labels`` order.

        Raises ValueError for a wrong label count or a repeated series (Prometheus rejects
        a whole scrape that holds one series twice).
        """
        spec = self._specs[name]
        if len(label_values) != len(spec.labels):
            raise ValueError(f"{name}: {len(label_values)} label values for {spec.labels}")
        key = (name, tuple(label_values))
        if key in self._seen:
            raise ValueError(f"{name}: series {label_values} added twice")
        self._seen.add(key)
        family = self._families[name]
        if isinstance(family, InfoMetricFamily):
            family.add_metric(list(label_values), {})
        elif isinstance(family, CounterMetricFamily | GaugeMetricFamily):
            family.add_metric(list(label_values), value)

    def metrics(self) -> list[Metric]:
        return [family for family in self._families.values() if family.samples]
