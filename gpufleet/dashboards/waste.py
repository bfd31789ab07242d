"""The idle-waste-and-recommendations dashboard.

Idle GPU-hours and their cost by namespace, team and GPU model come from the collector's
``gpufleet_workload_idle_gpu_seconds_total`` and ``gpufleet_workload_waste_total``
(ledger totals per workload and model; unallocated GPUs as the empty workload); a rate of
idle GPU-seconds is the average number of idle GPUs.
"""

from __future__ import annotations

from gpufleet.dashboards.energy import team_variable
from gpufleet.dashboards.fleet import MONEY, WASTE_UID, currency_variable
from gpufleet.dashboards.grafana import Json, Panel, Target, dashboard, query_variable
from gpufleet.dashboards.why import why_it_wastes

IDLE_METRIC = "gpufleet_workload_idle_gpu_seconds_total"
IDLE = 'gpufleet_workload_idle_gpu_seconds_total{k8s_namespace_name=~"$namespace", team=~"$team"}'
NS_WASTE = (
    'gpufleet_workload_waste_total{currency="$currency", k8s_namespace_name=~"$namespace", '
    'team=~"$team"}'
)


def idle_waste() -> Json:
    namespace = query_variable(
        "namespace",
        "Namespace",
        f"label_values({IDLE_METRIC}, k8s_namespace_name)",
        multi=True,
    )
    return dashboard(
        WASTE_UID,
        "gpufleet / Idle waste and recommendations",
        "Idle GPU-hours and their cost by namespace, team and GPU model; open "
        "recommendations and what they would save; what-if costs of plans; why busy "
        "workloads waste (bottlenecks) and the money on broken GPUs.",
        [
            *_idle_trends(),
            *_idle_tables(),
            *_owners(),
            *_recommendations(),
            *_plans(),
            *why_it_wastes(),
        ],
        [currency_variable(), namespace, team_variable(IDLE_METRIC), _owner_variable()],
    )


def _owner_variable() -> Json:
    """The owners (top of the owner chain) of the picked namespaces' workloads."""
    query = 'label_values(gpufleet_workload_info{k8s_namespace_name=~"$namespace"}, owner_name)'
    return query_variable("owner", "Owner", query, multi=True)


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


#: a workload series joined to its owner (gpufleet_workload_info, collector/kube)
OWNER_JOIN = (
    "* on (workload) group_left (owner_kind, owner_name) "
    'gpufleet_workload_info{owner_name=~"$owner"}'
)


def _owners() -> list[Panel]:
    """Idle cost and GPU-hours by owner: the Deployment, Job, PyTorchJob, Notebook (or
    a Slurm job's user) at the top of each workload's owner chain."""
    by = "owner_kind, owner_name"
    rate = f"rate({NS_WASTE}[$__rate_interval]) {OWNER_JOIN}"
    hours = f"increase({IDLE}[$__range]) {OWNER_JOIN}"
    return [
        Panel(
            "timeseries",
            "Idle cost by owner ($currency/h)",
            "Cost of idle GPU time per hour by owner (the top of each workload's owner "
            "chain: Deployment, CronJob, PyTorchJob, Notebook ...; a Slurm job's user).",
            "short",
            (Target(f"sum by ({by}) ({rate}) * 3600", "{{owner_kind}}/{{owner_name}}"),),
            defaults=MONEY,
        ),
        Panel(
            "table",
            "Idle GPU-hours by team and owner",
            "Idle GPU-hours in the dashboard's time range, by team and owner.",
            "h",
            (Target(f"sum by (team, {by}) ({hours}) / 3600", "", instant=True),),
            defaults={"decimals": 1},
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
            "Monthly saving if every open recommendation of the kind were acted on: up to "
            "the first bar if each situation lasts the month, at least the second if it "
            "lasts only as long again as it has been observed (a short window is weak "
            "evidence).",
            "short",
            (
                Target(
                    'gpufleet_recommendation_savings_per_month{currency="$currency"}',
                    "{{kind}} (if it lasts the month)",
                    instant=True,
                ),
                Target(
                    'gpufleet_recommendation_savings_low_per_month{currency="$currency"}',
                    "{{kind}} (if it lasts as long again as seen)",
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


PLAN_COST = 'gpufleet_plan_cost_per_month{currency="$currency"}'


def _plans() -> list[Panel]:
    return [
        Panel(
            "bargauge",
            "Cost per month by plan mix ($currency)",
            "Each pool's cost per month over the pricing look-back (30 days) under today's "
            "mix, the recommended mix (a reserved baseline plus on demand for the peaks), "
            "all on demand and all reserved; on-demand GPUs counted per allocated hour. "
            "gpufleet report --plans prints the same figures.",
            "short",
            (Target(f"sum by (scenario) ({PLAN_COST})", "{{scenario}}", instant=True),),
            width=12,
            defaults={"decimals": 0},
        ),
        Panel(
            "table",
            "Reserved GPUs per pool: today and recommended",
            "GPUs on a commitment plan (monthly, 1-year, 3-year) per pool, bought today and "
            "recommended.",
            "none",
            (Target("gpufleet_plan_reserved_gpus", "", instant=True),),
            width=12,
        ),
    ]
