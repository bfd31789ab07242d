"""Every metric a dashboard or a rule uses exists in a catalogue, with the labels used.

A typo in a metric or label name does not fail in Grafana or Prometheus: the panel just
shows "No data" and the alert never fires. This test is where such a typo fails.
"""

from __future__ import annotations

import functools

import pytest

from agent.metrics.catalogue import CATALOGUE as AGENT_CATALOGUE
from agent.metrics.dcgm_fields import DCGM_METRICS
from agent.model import THROTTLE_REASONS
from collector.metrics.catalogue import CATALOGUE as COLLECTOR_CATALOGUE
from collector.records import GpuState, RecommendationKind
from gpufleet.metric_spec import MetricSpec
from tests.dashboards.promql import Query, parse
from tests.dashboards.queries import (
    NVIDIA_DASHBOARD,
    PanelQuery,
    all_panel_queries,
    panel_queries,
    recording_rules,
    rules,
)

#: labels Prometheus adds to every scraped series
TARGET_LABELS = {"job", "instance"}
#: metrics Prometheus itself makes, with their labels
BUILTIN = {"up": TARGET_LABELS}
#: label values that must come from our enumerations (a wrong one silently matches nothing)
ENUMS: dict[tuple[str, str], set[str]] = {
    ("gpufleet_fleet_gpus", "state"): {s.value for s in GpuState},
    ("gpufleet_gpu_state", "state"): {s.value for s in GpuState},
    ("gpufleet_gpu_throttle_reason", "reason"): set(THROTTLE_REASONS.values()),
    ("gpufleet_gpu_ecc_errors_total", "type"): {"corrected", "uncorrected"},
    ("gpufleet_recommendations_open", "kind"): {k.value for k in RecommendationKind},
}


def _catalogue() -> dict[str, set[str]]:
    known = {spec.name: set(spec.labels) for spec in AGENT_CATALOGUE}
    for spec in COLLECTOR_CATALOGUE:
        assert spec.name not in known, f"{spec.name} is in both catalogues"
        known[spec.name] = set(spec.labels)
    known.update(BUILTIN)
    return known


@functools.cache
def _with_records() -> dict[str, set[str]]:
    """The catalogues plus recording rules, whose labels are their grouping labels (or
    their inputs')."""
    known = _catalogue()
    for rule in recording_rules():
        query = parse(rule["expr"])
        inputs = set().union(*(known[s.metric] for s in query.selectors))
        known[rule["record"]] = query.grouping or inputs
    return known


def problems(query: Query, known: dict[str, set[str]]) -> list[str]:
    found = []
    used_labels: set[str] = set(TARGET_LABELS)
    for selector in query.selectors:
        if selector.metric not in known:
            found.append(f"unknown metric {selector.metric}")
            continue
        labels = known[selector.metric] | TARGET_LABELS
        used_labels |= labels
        for matcher in selector.matchers:
            if matcher.label not in labels:
                found.append(f"{selector.metric} has no label {matcher.label}")
            allowed = ENUMS.get((selector.metric, matcher.label))
            if allowed is not None and matcher.op in ("=", "=~"):
                values = set(matcher.value.split("|")) if matcher.op == "=~" else {matcher.value}
                found += [f"{selector.metric}{{{matcher.label}}}: no value {v!r}"
                          for v in sorted(values - allowed)]  # fmt: skip
    found += [f"grouping on unknown label {label}" for label in query.grouping - used_labels]
    return found


@pytest.mark.parametrize("query", all_panel_queries(), ids=lambda q: q.id)
def test_every_dashboard_query_uses_catalogued_metrics_and_labels(query: PanelQuery) -> None:
    assert problems(parse(query.expr), _with_records()) == []


@pytest.mark.parametrize("rule", rules(), ids=lambda r: r.get("alert") or r["record"])
def test_every_rule_uses_catalogued_metrics_and_labels(rule: dict[str, object]) -> None:
    assert problems(parse(str(rule["expr"])), _with_records()) == []


def test_dashboards_select_metrics_at_all() -> None:
    queries = all_panel_queries()
    assert len(queries) > 40
    assert all(parse(q.expr).selectors for q in queries)


def test_nvidia_dashboard_uses_only_fields_the_agent_exports_in_dcgm_mode() -> None:
    dcgm = {spec.name: set(spec.labels) for spec in DCGM_METRICS}
    for query in panel_queries(NVIDIA_DASHBOARD):
        assert problems(parse(query.expr), dcgm) == [], query.id


def test_the_checker_catches_a_wrong_metric_label_and_value() -> None:
    known = _catalogue()
    assert problems(parse("gpufleet_gpu_power_wats"), known) == [
        "unknown metric gpufleet_gpu_power_wats"
    ]
    assert problems(parse('gpufleet_gpu_power_watts{namespace="x"}'), known) == [
        "gpufleet_gpu_power_watts has no label namespace"
    ]
    assert problems(parse('gpufleet_fleet_gpus{state="idle"}'), known) == [
        "gpufleet_fleet_gpus{state}: no value 'idle'"
    ]
    assert problems(parse("sum by (pod) (gpufleet_fleet_power_watts)"), known) == [
        "grouping on unknown label pod"
    ]


def test_both_catalogues_have_one_row_type() -> None:
    """The agent's and the collector's rows are one type (gpufleet.metric_spec.MetricSpec), so
    what a row is, and any rule about rows, is written once."""
    assert {type(spec) for spec in (*AGENT_CATALOGUE, *COLLECTOR_CATALOGUE)} == {MetricSpec}
