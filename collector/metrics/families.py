"""A catalogue family filled with values (``Family``), and its exposition written straight
from the label tuples: the Prometheus text format 0.0.4 and OpenMetrics 1.0.0, byte for byte
what prometheus_client writes for the same family (tests/collector/metrics/
test_families.py checks both against it, escapes included).

prometheus_client spends ~14 us per sample building ``Sample`` tuples and label dicts and
then formatting them; a 10,000-GPU fleet has ~46,000 samples, ~0.65 s a scrape. Writing
the lines from the tuples, labels sorted by name once per family, takes a fifth of that.
Only gauges and counters (the collector's catalogue has no other type), only the default
name escaping (``underscores``: the catalogue's names and labels are legacy-valid, so it
changes nothing); anything else goes through prometheus_client (collector/metrics/cache.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from gpufleet.metric_spec import MetricSpec

Labels = tuple[str, ...]
#: OpenMetrics' last line; a body made of several parts carries it once, at the end
OPENMETRICS_EOF = "# EOF\n"


class Family(NamedTuple):
    """One catalogue row and its samples: label values in ``spec.labels`` order -> value."""

    spec: MetricSpec
    values: Mapping[Labels, float]


def family(spec: MetricSpec) -> CounterMetricFamily | GaugeMetricFamily:
    """An empty prometheus_client family for ``spec``, with its help, labels and unit."""
    if spec.type == "counter":
        return CounterMetricFamily(spec.name, spec.help, labels=spec.labels, unit=spec.unit)
    return GaugeMetricFamily(spec.name, spec.help, labels=spec.labels, unit=spec.unit)


def filled(spec: MetricSpec, values: Mapping[Labels, float]) -> Metric:
    """A prometheus_client family of ``spec``, one sample per label tuple in sorted order."""
    metric = family(spec)
    for labels in sorted(values):
        metric.add_metric(list(labels), values[labels])
    return metric


def render_families(families: Iterable[Family], openmetrics: bool) -> str:
    """The families' exposition (without OpenMetrics' ``# EOF``), samples in label order."""
    return SeriesWriter().render(families, openmetrics)


class _Series(NamedTuple):
    """A series as last written: its value, its line head and its line."""

    value: float
    head: str
    line: str


class SeriesWriter:
    """Writes families as ``render_families`` does, keeping each series' line from one
    render to the next (the same in both formats): a series whose value did not change is
    not written again, one whose value did keeps its head (``name{a="x",b="y"} ``) and
    formats only the value. It keeps its last render's series only: one gone from the
    families is dropped at the next render. Not thread-safe (the exposition renders under
    its lock)."""

    def __init__(self) -> None:
        #: family name -> label values -> the series as last written
        self._series: dict[str, dict[Labels, _Series]] = {}

    def render(self, families: Iterable[Family], openmetrics: bool) -> str:
        kept: dict[str, dict[Labels, _Series]] = {}
        text = "".join(self._family_text(family, openmetrics, kept) for family in families)
        self._series = kept
        return text

    def _family_text(
        self, family: Family, openmetrics: bool, kept: dict[str, dict[Labels, _Series]]
    ) -> str:
        spec = family.spec
        known = self._series.get(spec.name, {})
        series = kept.setdefault(spec.name, {})
        lines = [_preamble(spec, openmetrics)]
        values = family.values
        for labels in sorted(values):
            value, last = values[labels], known.get(labels)
            # a changed value, or a zero whose sign may have changed (NaN never equals)
            if last is None or last.value != value or (not value and not _same(last.value, value)):
                head = last.head if last is not None else _series_head(spec, labels)
                last = _Series(value, head, f"{head}{_go_float(value)}\n")
            series[labels] = last
            lines.append(last.line)
        return "".join(lines)


def _same(before: float, now: float) -> bool:
    """Whether ``now`` is written as ``before`` was: equal, and of one sign if zero (-0.0
    is written "-0.0"); NaN is never the same."""
    return before == now and (now != 0 or math.copysign(1.0, before) == math.copysign(1.0, now))


def _preamble(spec: MetricSpec, openmetrics: bool) -> str:
    """A family's HELP, TYPE and (OpenMetrics, when it has one) UNIT lines."""
    if spec.type not in ("gauge", "counter"):
        raise ValueError(f"{spec.name}: only gauges and counters are rendered here")
    # the text format names a counter's family as its samples; OpenMetrics without _total
    head = spec.name.removesuffix("_total") if openmetrics and spec.type == "counter" else spec.name
    doc = spec.help.replace("\\", r"\\").replace("\n", r"\n")
    if openmetrics:  # OpenMetrics escapes a double quote in HELP too
        doc = doc.replace('"', r"\"")
    lines = f"# HELP {head} {doc}\n# TYPE {head} {spec.type}\n"
    if openmetrics and spec.unit:
        lines += f"# UNIT {head} {spec.unit}\n"
    return lines


def _series_head(spec: MetricSpec, labels: Labels) -> str:
    """``name{a="x",b="y"} ``: the sample name and its labels sorted by name, escaped."""
    if not labels:
        return f"{spec.name} "
    pairs = sorted(zip(spec.labels, labels, strict=True))
    return spec.name + "{" + ",".join(f'{n}="{_escaped(v)}"' for n, v in pairs) + "} "


def _go_float(value: float) -> str:
    return floatToGoString(value)  # type: ignore[no-untyped-call,no-any-return]


def _escaped(value: str) -> str:
    """A label value with backslash, newline and double quote escaped (both formats)."""
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value
