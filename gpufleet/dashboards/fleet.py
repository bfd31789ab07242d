"""The fleet overview dashboard (and what the other dashboards share: currency, links).

Money comes from the collector's ``gpufleet_workload_waste_total`` (idle GPU-seconds x the
price book's hourly price) in the currency chosen in ``$currency``; Prometheus rates are
per second, so "per hour" panels multiply by 3600. "Waste now" is the collector's
``gpufleet_fleet_idle_cost_per_hour``: the hourly price of the GPUs idle at this moment.
"""

from __future__ import annotations

from gpufleet.dashboards.grafana import (
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
#: a per-workload table joined to who it belongs to (gpufleet_workload_info, collector/kube):
#: a workload is listed from the collector's first commit of it on
WHO_JOIN = "* on (workload) group_left (team, owner_kind, owner_name) gpufleet_workload_info"
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
        "The summed hourly price of every GPU idle now (allocated-idle or unallocated), "
        "from the price book: what the idle GPUs cost per hour if they stay idle.",
        "short",
        (
            Target(
                'sum(gpufleet_fleet_idle_cost_per_hour{currency="$currency"})',
                "waste",
                instant=True,
            ),
        ),
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
            "Allocated-idle GPUs per workload right now, with its team and owner. Click a "
            "workload for its detail.",
            "none",
            (
                Target(
                    "sort_desc(count by (k8s_namespace_name, workload, model) "
                    '(gpufleet_gpu_state{state="allocated_idle"} == 1) '
                    f"{WHO_JOIN})",
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
            "The ten workloads whose idle GPUs cost most in the dashboard's time range, "
            "with their team and owner.",
            "short",
            (
                Target(
                    "topk(10, sum by (k8s_namespace_name, workload) "
                    '(increase(gpufleet_workload_waste_total{currency="$currency", '
                    f'workload!=""}}[$__range])) {WHO_JOIN})',
                    "",
                    instant=True,
                ),
            ),
            width=9,
            defaults={**MONEY, **_workload_link()},
        ),
    ]
