"""The fleet overview and the idle-waste-and-recommendations dashboards.

Money comes from the collector's ``gpufleet_workload_waste_total`` (idle GPU-seconds x the
price book's hourly price) in the currency chosen in ``$currency``; Prometheus rates are
per second, so "per hour" panels multiply by 3600.
"""

from __future__ import annotations

from gpufleet.dashboards_grafana import (
    Json,
    Panel,
    Target,
    dashboard,
    data_link,
    query_variable,
    target_line,
)

FLEET_UID = "gpufleet-fleet"
WASTE_UID = "gpufleet-waste"
WORKLOAD_UID = "gpufleet-workload"
UTILISATION_TARGET = 0.7

WASTE = 'gpufleet_workload_waste_total{currency="$currency"}'
IDLE = 'gpufleet_workload_idle_gpu_seconds_total{k8s_namespace_name=~"$namespace"}'
NS_WASTE = 'gpufleet_workload_waste_total{currency="$currency", k8s_namespace_name=~"$namespace"}'
MONEY = {"decimals": 2}


def currency_variable() -> Json:
    return query_variable(
        "currency", "Currency", "label_values(gpufleet_workload_waste_total, currency)"
    )


def _workload_link() -> Json:
    link = data_link("Workload detail", WORKLOAD_UID, workload="${__data.fields.workload}")
    return {"links": [link]}


def fleet_overview() -> Json:
    state_stat = Panel(
        "stat",
        "GPUs by state",
        "GPUs and MIG instances now: active (SM or DRAM activity at or above the idle "
        "threshold), allocated_idle (held by a workload, idle), unallocated (nobody holds "
        "it), unknown (missing or stale data; never counted as idle).",
        "none",
        (Target("sum by (state) (gpufleet_fleet_gpus)", "{{state}}", instant=True),),
        width=8,
        height=5,
        options={"colorMode": "value", "graphMode": "none", "textMode": "value_and_name"},
    )
    utilisation = Panel(
        "gauge",
        "Fleet utilisation (target 70 %)",
        "Mean SM activity over GPUs with fresh data. The green band starts at the 70 % "
        "utilisation target.",
        "percentunit",
        (Target("gpufleet_fleet_utilisation_ratio", "utilisation", instant=True),),
        width=4,
        height=5,
        defaults={"min": 0, "max": 1, **target_line(UTILISATION_TARGET)},
    )
    waste_now = Panel(
        "stat",
        "Waste now ($currency/h)",
        "Cost of idle GPU time per hour, averaged over the last 5 minutes.",
        "short",
        (Target(f"sum(rate({WASTE}[5m])) * 3600", "waste", instant=True),),
        width=4,
        height=5,
        defaults=MONEY,
    )
    waste_today = Panel(
        "stat",
        "Waste today ($currency)",
        "Cost of idle GPU time since midnight (the panel's time range is today).",
        "short",
        (Target(f"sum(increase({WASTE}[$__range]))", "waste", instant=True),),
        width=4,
        height=5,
        defaults=MONEY,
        time_from="now/d",
    )
    power_now = Panel(
        "stat",
        "Fleet power",
        "Power draw summed over physical GPUs with fresh data (MIG instances not double counted).",
        "watt",
        (Target("gpufleet_fleet_power_watts", "power", instant=True),),
        width=4,
        height=5,
    )
    return dashboard(
        FLEET_UID,
        "gpufleet / Fleet overview",
        "GPUs by state, utilisation against the 70 % target, idle waste in money, power "
        "and energy, and the workloads holding idle GPUs.",
        [state_stat, utilisation, waste_now, waste_today, power_now, *_fleet_trends()],
        [currency_variable()],
    )


def _fleet_trends() -> list[Panel]:
    return [
        Panel(
            "timeseries",
            "GPUs by state",
            "GPUs and MIG instances in each state over time.",
            "none",
            (Target("sum by (state) (gpufleet_fleet_gpus)", "{{state}}"),),
            defaults={"custom": {"stacking": {"mode": "normal"}, "fillOpacity": 60}},
        ),
        Panel(
            "timeseries",
            "Fleet utilisation against the 70 % target",
            "Mean SM activity of GPUs with fresh data; the dashed line is the target.",
            "percentunit",
            (Target("gpufleet_fleet_utilisation_ratio", "utilisation"),),
            defaults={"min": 0, "max": 1, **target_line(UTILISATION_TARGET)},
        ),
        Panel(
            "timeseries",
            "Idle cost by namespace ($currency/h)",
            "Cost of idle GPU time per hour by Kubernetes namespace; an empty namespace is "
            "unallocated GPUs and Slurm jobs.",
            "short",
            (
                Target(
                    f"sum by (k8s_namespace_name) (rate({WASTE}[$__rate_interval])) * 3600",
                    "{{k8s_namespace_name}}",
                ),
            ),
            defaults=MONEY,
        ),
        Panel(
            "timeseries",
            "Power and energy",
            "Fleet power draw (left) and GPU energy attributed to workloads per hour.",
            "watt",
            (
                Target("gpufleet_fleet_power_watts", "fleet power"),
                Target(
                    "sum(rate(gpufleet_workload_energy_joules_total[$__rate_interval]))",
                    "attributed energy rate",
                ),
            ),
        ),
        Panel(
            "stat",
            "Energy today",
            "GPU energy since midnight, from the NVML energy counters (or power integration "
            "where a GPU has none).",
            "kwatth",
            (
                Target(
                    "sum(increase(gpufleet_workload_energy_joules_total[$__range])) / 3600000",
                    "energy",
                    instant=True,
                ),
            ),
            width=6,
            height=8,
            time_from="now/d",
        ),
        Panel(
            "table",
            "Workloads holding idle GPUs now",
            "Allocated-idle GPUs per workload right now. Click a workload for its detail.",
            "none",
            (
                Target(
                    "sort_desc(count by (k8s_namespace_name, workload, model) "
                    '(gpufleet_gpu_state{state="allocated_idle"} == 1))',
                    "",
                    instant=True,
                ),
            ),
            width=9,
            defaults=_workload_link(),
        ),
        Panel(
            "table",
            "Top idle workloads by waste ($currency)",
            "The ten workloads whose idle GPUs cost most in the dashboard's time range.",
            "short",
            (
                Target(
                    "topk(10, sum by (k8s_namespace_name, workload) "
                    '(increase(gpufleet_workload_waste_total{currency="$currency", '
                    'workload!=""}[$__range])))',
                    "",
                    instant=True,
                ),
            ),
            width=9,
            defaults={**MONEY, **_workload_link()},
        ),
    ]


def idle_waste() -> Json:
    namespace = query_variable(
        "namespace",
        "Namespace",
        "label_values(gpufleet_workload_idle_gpu_seconds_total, k8s_namespace_name)",
        multi=True,
    )
    return dashboard(
        WASTE_UID,
        "gpufleet / Idle waste and recommendations",
        "Idle GPU-hours and their cost by namespace, team and GPU model; open "
        "recommendations and what they would save.",
        [*_idle_trends(), *_idle_tables(), *_recommendations()],
        [currency_variable(), namespace],
    )


def _idle_rate(by: str, legend: str) -> Panel:
    return Panel(
        "timeseries",
        f"Idle GPUs by {legend}",
        f"Idle GPU-hours per hour by {legend}: the average number of idle GPUs.",
        "none",
        (Target(f"sum by ({by}) (rate({IDLE}[$__rate_interval]))", f"{{{{{by}}}}}"),),
        width=8,
    )


def _cost_rate(by: str, legend: str) -> Panel:
    return Panel(
        "timeseries",
        f"Idle cost by {legend} ($currency/h)",
        f"Cost of idle GPU time per hour by {legend}.",
        "short",
        (Target(f"sum by ({by}) (rate({NS_WASTE}[$__rate_interval])) * 3600", f"{{{{{by}}}}}"),),
        width=8,
        defaults=MONEY,
    )


def _idle_trends() -> list[Panel]:
    return [
        _idle_rate("k8s_namespace_name", "namespace"),
        _idle_rate("team", "team"),
        _idle_rate("model", "GPU model"),
        _cost_rate("k8s_namespace_name", "namespace"),
        _cost_rate("team", "team"),
        _cost_rate("model", "GPU model"),
    ]


def _idle_tables() -> list[Panel]:
    by = "k8s_namespace_name, team, model"
    return [
        Panel(
            "table",
            "Idle GPU-hours by namespace, team and model",
            "Idle GPU-hours in the dashboard's time range.",
            "h",
            (Target(f"sum by ({by}) (increase({IDLE}[$__range])) / 3600", "", instant=True),),
            defaults={"decimals": 1},
        ),
        Panel(
            "table",
            "Idle cost by namespace, team and model ($currency)",
            "Cost of idle GPU time in the dashboard's time range.",
            "short",
            (Target(f"sum by ({by}) (increase({NS_WASTE}[$__range]))", "", instant=True),),
            defaults=MONEY,
        ),
    ]


def _recommendations() -> list[Panel]:
    return [
        Panel(
            "bargauge",
            "Open recommendations by kind",
            "Recommendations open or notified: release_idle, scale_down, right_size, "
            "pricing_plan, consolidate.",
            "none",
            (Target("gpufleet_recommendations_open", "{{kind}}", instant=True),),
            width=8,
        ),
        Panel(
            "bargauge",
            "Savings of open recommendations ($currency/month)",
            "Estimated monthly saving if every open recommendation of the kind were acted on.",
            "short",
            (
                Target(
                    'gpufleet_recommendation_savings_per_month{currency="$currency"}',
                    "{{kind}}",
                    instant=True,
                ),
            ),
            width=8,
            defaults={"decimals": 0},
        ),
        Panel(
            "timeseries",
            "Open recommendations over time",
            "Open or notified recommendations by kind.",
            "none",
            (Target("sum by (kind) (gpufleet_recommendations_open)", "{{kind}}"),),
            width=8,
        ),
    ]
