"""Where the queries live: every panel query of our dashboards and NVIDIA's, every rule.

Read from the committed files (what Grafana and Prometheus will load), not from the Python
that generates them; the golden test keeps the two equal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "dashboards"
RULES = ROOT / "alerts" / "gpufleet-rules.yml"
NVIDIA_DASHBOARD = ROOT / "tests" / "fixtures" / "reference" / "dcgm-exporter-dashboard.json"


@dataclass(frozen=True)
class PanelQuery:
    dashboard: str
    panel: str
    ref_id: str
    expr: str
    instant: bool

    @property
    def id(self) -> str:
        return f"{self.dashboard}:{self.panel}:{self.ref_id}"


def dashboard_files() -> list[Path]:
    return sorted(DASHBOARDS.glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    board: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return board


def panel_queries(path: Path) -> list[PanelQuery]:
    board = load(path)
    queries = []
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            instant = bool(target.get("instant")) and not target.get("range", False)
            queries.append(
                PanelQuery(path.stem, panel["title"], target["refId"], target["expr"], instant)
            )
    return queries


def all_panel_queries() -> list[PanelQuery]:
    return [query for path in dashboard_files() for query in panel_queries(path)]


def rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"]]


def recording_rules() -> list[dict[str, Any]]:
    return [rule for rule in rules() if "record" in rule]


def alerting_rules() -> list[dict[str, Any]]:
    return [rule for rule in rules() if "alert" in rule]
