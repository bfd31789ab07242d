"""Dashboards and rules in the chart are the repository's dashboards/ and alerts/ files.

helm/gpufleet/files/{dashboards,alerts} are symlinks to them: one source of truth. The
tests compare what the rendered chart carries with the files themselves, so they hold
whether the directories are empty or full.
"""

from __future__ import annotations

import json
import os
from typing import Any

import yaml

from tests.helm.chart import CHART_DIR, REPO, full_values, render


def source_rule_groups() -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = []
    for path in sorted((REPO / "alerts").glob("*.yml")):
        doc = yaml.safe_load(path.read_text())
        if isinstance(doc, dict) and "groups" in doc:
            groups.extend(doc["groups"])
    return groups


def test_the_chart_links_to_the_one_source() -> None:
    for name in ("dashboards", "alerts"):
        link = CHART_DIR / "files" / name
        assert link.is_symlink()
        assert link.resolve() == (REPO / name).resolve()
        assert os.readlink(link) == f"../../../{name}"  # relative: works in any checkout


def test_one_dashboard_config_map_per_json_file_with_the_json_unchanged() -> None:
    sources = {p.name: p.read_text() for p in sorted((REPO / "dashboards").glob("*.json"))}
    maps = render(full_values()).all("ConfigMap")
    dashboards = [m for m in maps if m["metadata"]["labels"].get("grafana_dashboard") == "1"]
    carried = {key: text for m in dashboards for key, text in m["data"].items()}
    assert carried.keys() == sources.keys()
    for name, text in sources.items():
        assert carried[name] == text.rstrip("\n"), f"{name} changed on the way into the chart"
        json.loads(carried[name])
    for config_map in dashboards:
        assert config_map["metadata"]["namespace"] == "monitoring"
        assert config_map["metadata"]["annotations"] == {"grafana_folder": "GPU fleet (prod)"}


def test_dashboards_can_be_turned_off() -> None:
    out = render({"grafana": {"dashboards": {"enabled": False}}})
    assert not [m for m in out.all("ConfigMap") if "grafana_dashboard" in m["metadata"]["labels"]]


def test_the_prometheus_rule_carries_every_rule_group_of_alerts() -> None:
    groups = source_rule_groups()
    rules = render(full_values()).all("PrometheusRule")
    if not groups:  # an empty PrometheusRule is invalid, so there is none
        assert rules == []
        return
    [rule] = rules
    assert rule["spec"]["groups"] == groups
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_no_prometheus_rule_unless_asked() -> None:
    assert render().all("PrometheusRule") == []
