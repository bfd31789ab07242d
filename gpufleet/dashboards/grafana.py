"""Grafana dashboard JSON as plain dicts: panels, targets, variables, links.

Only what our dashboards use, in the shape Grafana 10/11 saves (schemaVersion 39). Every
panel queries the Prometheus datasource chosen in the ``datasource`` variable, carries a
unit (``fieldConfig.defaults.unit``) and a description; panels are laid out left to right
on a 24-column grid in the order given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 39
GRID_COLUMNS = 24
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
TAG = "gpufleet"

Json = dict[str, Any]


@dataclass(frozen=True)
class Target:
    """One PromQL query of a panel; ``instant`` for tables and single values."""

    expr: str
    legend: str = "__auto"
    instant: bool = False


@dataclass(frozen=True)
class Panel:
    """A panel before layout. ``kind`` is Grafana's panel type (timeseries, stat, ...)."""

    kind: str
    title: str
    description: str
    unit: str
    targets: tuple[Target, ...]
    width: int = 12
    height: int = 8
    #: extra fieldConfig.defaults (min, max, thresholds, decimals, links, custom)
    defaults: Json = field(default_factory=dict)
    options: Json = field(default_factory=dict)
    #: Grafana's panel-level relative time (e.g. "now/d" for "today")
    time_from: str | None = None


def target_json(target: Target, ref_id: str) -> Json:
    return {
        "datasource": DATASOURCE,
        "editorMode": "code",
        "expr": target.expr,
        "instant": target.instant,
        "legendFormat": target.legend,
        "range": not target.instant,
        "refId": ref_id,
    }


def panel_json(panel: Panel, panel_id: int, x: int, y: int) -> Json:
    refs = "ABCDEFGHIJ"
    body: Json = {
        "datasource": DATASOURCE,
        "description": panel.description,
        "fieldConfig": {"defaults": {"unit": panel.unit, **panel.defaults}, "overrides": []},
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "id": panel_id,
        "options": panel.options,
        "targets": [target_json(t, refs[i]) for i, t in enumerate(panel.targets)],
        "title": panel.title,
        "type": panel.kind,
    }
    if panel.time_from is not None:
        body["timeFrom"] = panel.time_from
    return body


def layout(panels: Sequence[Panel]) -> list[Json]:
    """Panels placed left to right, wrapping at 24 columns; ids from 1."""
    placed: list[Json] = []
    x = y = row_height = 0
    for panel_id, panel in enumerate(panels, start=1):
        if x + panel.width > GRID_COLUMNS:
            x, y, row_height = 0, y + row_height, 0
        placed.append(panel_json(panel, panel_id, x, y))
        x += panel.width
        row_height = max(row_height, panel.height)
    return placed


def datasource_variable() -> Json:
    return {
        "current": {},
        "hide": 0,
        "includeAll": False,
        "label": "Data source",
        "multi": False,
        "name": "datasource",
        "options": [],
        "query": "prometheus",
        "refresh": 1,
        "type": "datasource",
    }


def query_variable(name: str, label: str, query: str, *, multi: bool = False) -> Json:
    """A ``label_values(...)`` variable; ``multi`` ones offer All (matching ``.*``)."""
    return {
        "allValue": ".*" if multi else None,
        "current": {},
        "datasource": DATASOURCE,
        "definition": query,
        "hide": 0,
        "includeAll": multi,
        "label": label,
        "multi": multi,
        "name": name,
        "options": [],
        "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "refresh": 2,
        "sort": 1,
        "type": "query",
    }


def dashboard_links() -> list[Json]:
    """A drop-down of every gpufleet dashboard, keeping the time range and variables."""
    return [
        {
            "asDropdown": True,
            "icon": "external link",
            "includeVars": True,
            "keepTime": True,
            "tags": [TAG],
            "title": "gpufleet",
            "type": "dashboards",
        }
    ]


def dashboard(
    uid: str, title: str, description: str, panels: Sequence[Panel], variables: Sequence[Json]
) -> Json:
    """A complete dashboard; ``id`` is null so it imports into any Grafana."""
    return {
        "annotations": {"list": []},
        "description": description,
        "editable": True,
        "graphTooltip": 1,
        "id": None,
        "links": dashboard_links(),
        "panels": layout(panels),
        "refresh": "1m",
        "schemaVersion": SCHEMA_VERSION,
        "tags": [TAG],
        "templating": {"list": [datasource_variable(), *variables]},
        "time": {"from": "now-24h", "to": "now"},
        "timepicker": {},
        "timezone": "browser",
        "title": title,
        "uid": uid,
        "version": 1,
    }


def data_link(title: str, uid: str, **variables: str) -> Json:
    """A link to another gpufleet dashboard, passing variables and the time range."""
    query = "&".join(f"var-{name}={value}" for name, value in variables.items())
    return {"title": title, "url": f"/d/{uid}?{query}&${{__url_time_range}}"}


def target_line(value: float) -> Json:
    """fieldConfig.defaults that draw a dashed threshold line at ``value`` (red below)."""
    return {
        "custom": {"thresholdsStyle": {"mode": "dashed"}},
        "thresholds": {
            "mode": "absolute",
            "steps": [{"color": "red", "value": None}, {"color": "green", "value": value}],
        },
    }
