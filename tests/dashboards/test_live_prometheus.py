"""Every panel query of every dashboard (ours and NVIDIA's dcgm-exporter dashboard,
unmodified) returns data from a real Prometheus scraping a running ``gpufleet demo``, and
every recording rule evaluates to data.

Template variables are resolved the way Grafana does: each ``label_values(...)`` query is
run against Prometheus in order (later ones see earlier choices) and its first value is
used; Grafana's ``$__rate_interval``/``$__range``/``$__interval`` become fixed durations.
"""

from __future__ import annotations

import functools
import math
import re
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest

from collector.analysis.carbon import IntensityTable
from collector.analysis.cost import PriceBook
from collector.config import CarbonSettings
from tests.dashboards.live_stack import (
    GPUS,
    OFF_BUS_GPUS,
    Prometheus,
    escape_regex,
    live_stack,
)
from tests.dashboards.queries import (
    DASHBOARDS,
    NVIDIA_DASHBOARD,
    PanelQuery,
    alerting_rules,
    all_panel_queries,
    load,
    panel_queries,
    recording_rules,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="Debian package prometheus"),
]
BUILTINS = {"__rate_interval": "30s", "__range": "1h", "__interval": "10s"}
LABEL_VALUES = re.compile(r"^label_values\((?:(.*),\s*)?(\w+)\)$")
QUERIES = all_panel_queries() + panel_queries(NVIDIA_DASHBOARD)
IDLE_GPUS = 'gpufleet_fleet_gpus{state=~"allocated_idle|unallocated"}'


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    with live_stack(tmp_path_factory.mktemp("live")) as prometheus:
        yield prometheus


def substitute(text: str, values: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return values[name] if name in values else match.group(0)

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, text)


def resolve_variables(board: dict[str, Any], prom: Prometheus) -> dict[str, str]:
    """Variable name -> the text Grafana would put in the query for its first value."""
    values = dict(BUILTINS)
    for variable in board["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]
        text = query["query"] if isinstance(query, dict) else query
        match = LABEL_VALUES.match(substitute(text, values))
        assert match, f"unsupported variable query {text!r}"
        options = prom.label_values(match.group(1), match.group(2))
        assert options, f"variable ${variable['name']} has no values: {text}"
        regex = variable.get("multi") or variable.get("includeAll")
        values[variable["name"]] = escape_regex(options[0]) if regex else options[0]
    return values


@functools.cache
def _board(name: str) -> dict[str, Any]:
    path = NVIDIA_DASHBOARD if name == NVIDIA_DASHBOARD.stem else DASHBOARDS / f"{name}.json"
    return load(path)


@pytest.fixture(scope="module")
def variables(prom: Prometheus) -> dict[str, dict[str, str]]:
    names = {query.dashboard for query in QUERIES}
    return {name: resolve_variables(_board(name), prom) for name in names}


def _finite_values(result: list[dict[str, Any]]) -> list[float]:
    points = [s["value"] for s in result if "value" in s]
    points += [p for s in result for p in s.get("values", [])]
    return [float(v) for _, v in points if math.isfinite(float(v))]


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.id)
def test_panel_query_returns_data(
    query: PanelQuery, prom: Prometheus, variables: dict[str, dict[str, str]]
) -> None:
    expr = substitute(query.expr, variables[query.dashboard])
    assert "$" not in expr, expr
    assert _data_within(prom, expr, query.instant), f"no data for {expr}"


def _data_within(prom: Prometheus, expr: str, instant: bool, attempts: int = 4) -> bool:
    """Data in one of a few tries a second apart, as a dashboard refresh would see it: on
    a loaded machine one scrape can time out, and Prometheus then marks that target's
    series stale until the next scrape succeeds."""
    for attempt in range(attempts):
        result = prom.query(expr) if instant else prom.query_range(expr, seconds=20)
        if _finite_values(result):
            return True
        if attempt + 1 < attempts:
            time.sleep(1.0)
    return False


@pytest.mark.parametrize("rule", recording_rules(), ids=lambda r: r["record"])
def test_recording_rule_evaluates_to_data(rule: dict[str, Any], prom: Prometheus) -> None:
    assert _data_within(prom, rule["expr"], instant=True), rule["expr"]
    assert _data_within(prom, rule["record"], instant=True), "Prometheus did not record it"


@pytest.mark.parametrize("rule", alerting_rules(), ids=lambda r: r["alert"])
def test_alert_expression_evaluates(rule: dict[str, Any], prom: Prometheus) -> None:
    prom.query(rule["expr"])  # raises on a PromQL error; most alerts are (rightly) quiet


def test_the_demo_fleet_is_all_there(prom: Prometheus) -> None:
    assert len(prom.query("gpufleet_gpu_info")) == GPUS
    assert len(prom.query("DCGM_FI_DEV_GPU_TEMP")) == GPUS - OFF_BUS_GPUS
    assert prom.query("sum(gpufleet_node_gpus_missing)")[0]["value"][1] == str(OFF_BUS_GPUS)
    assert prom.query("sum(gpufleet_fleet_gpus)")[0]["value"][1] == str(GPUS)


def test_waste_now_is_the_hourly_price_of_the_gpus_idle_in_the_same_scrape(
    prom: Prometheus,
) -> None:
    """gpufleet_fleet_idle_cost_per_hour against the collector's idle GPUs by model, priced
    from the demo's (example) price book; both read at one instant, so from one scrape."""
    prices = PriceBook.example()
    for _ in range(4):  # the two families take the demo's clock a moment apart
        at = time.time()
        idle = prom.query(f"sum by (model) ({IDLE_GPUS})", at)
        cost = prom.query("gpufleet_fleet_idle_cost_per_hour", at)
        expected = sum(float(s["value"][1]) * prices.price_per_gpu_hour(s["metric"]["model"])
                       for s in idle)  # fmt: skip
        if cost and expected > 0 and float(cost[0]["value"][1]) == pytest.approx(expected):
            assert cost[0]["metric"]["currency"] == prices.currency
            return
        time.sleep(1.0)
    raise AssertionError(f"waste now {cost} is not the price of the idle GPUs {idle}")


def test_pue_and_grid_intensity_are_the_demo_s_settings(prom: Prometheus) -> None:
    (pue,) = prom.query("gpufleet_carbon_pue_ratio")
    assert float(pue["value"][1]) == CarbonSettings().pue
    (grid,) = prom.query("gpufleet_carbon_intensity_grams_per_kilowatt_hour")
    assert grid["metric"]["region"] == "world"  # the demo's nodes send no region label
    assert float(grid["value"][1]) == IntensityTable.default().intensity_g_per_kwh("world")


def test_a_misspelt_query_gets_no_data_so_the_checks_can_fail(prom: Prometheus) -> None:
    assert not _finite_values(prom.query_range("gpufleet_gpu_power_wats", seconds=20))
    assert not _finite_values(prom.query('gpufleet_fleet_gpus{state="idle"}'))


def test_variables_resolve_to_real_workloads_and_nvidia_targets(
    variables: dict[str, dict[str, str]],
) -> None:
    assert variables["workload-detail"]["workload"].startswith(("pod:", "slurm:"))
    assert variables["workload-detail"]["currency"] == "USD"
    assert re.fullmatch(
        r"127\\\\\.0\\\\\.0\\\\\.1:\d+", variables["dcgm-exporter-dashboard"]["instance"]
    )
