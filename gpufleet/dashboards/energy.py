"""The energy-and-carbon dashboard.

Energy and carbon per workload come from the collector's counters (joules and grams since
the ledger began, and the part of the joules estimated from power); the PUE and the grid
intensity per region in use come from the collector's gauges.
"""

from __future__ import annotations

from gpufleet.dashboards.grafana import Json, Panel, Target, dashboard, query_variable

ENERGY_UID = "gpufleet-energy"
KWH = "3600000"
#: the workload series the $namespace and $team variables select
PICKED = 'k8s_namespace_name=~"$namespace", team=~"$team"'
ENERGY = f"gpufleet_workload_energy_joules_total{{{PICKED}}}"
ESTIMATED = f"gpufleet_workload_estimated_energy_joules_total{{{PICKED}}}"
CARBON = f"gpufleet_workload_carbon_grams_total{{{PICKED}}}"
#: a workload series joined to its owner (gpufleet_workload_info, collector/kube)
OWNER_JOIN = "* on (workload) group_left (owner_kind, owner_name) gpufleet_workload_info"


def namespace_variable(metric: str) -> Json:
    query = f"label_values({metric}, k8s_namespace_name)"
    return query_variable("namespace", "Namespace", query, multi=True)


def team_variable(metric: str) -> Json:
    """The teams of the workloads in the picked namespaces (All matches no team too)."""
    query = f'label_values({metric}{{k8s_namespace_name=~"$namespace"}}, team)'
    return query_variable("team", "Team", query, multi=True)


def energy_carbon() -> Json:
    return dashboard(
        ENERGY_UID,
        "gpufleet / Energy and carbon",
        "GPU energy (kWh) and emissions (kgCO2e) by workload and namespace, the PUE and "
        "the grid carbon intensity in use per region, and how the energy was measured "
        "(energy counter or estimate from power).",
        [*_by_namespace(), *_top_workloads(), *_measurement()],
        [
            namespace_variable("gpufleet_workload_energy_joules_total"),
            team_variable("gpufleet_workload_energy_joules_total"),
        ],
    )


def _by_namespace() -> list[Panel]:
    return [
        Panel(
            "timeseries",
            "GPU power by namespace",
            "Energy attributed to each namespace per second (average power); an empty "
            "namespace is unallocated GPUs (fleet overhead) and Slurm jobs.",
            "watt",
            (
                Target(
                    f"sum by (k8s_namespace_name) (rate({ENERGY}[$__rate_interval]))",
                    "{{k8s_namespace_name}}",
                ),
            ),
        ),
        Panel(
            "timeseries",
            "Emissions by namespace (kgCO2e/h)",
            "kWh x PUE x grid intensity of the node's region, per hour.",
            "suffix: kgCO2e/h",
            (
                Target(
                    f"sum by (k8s_namespace_name) (rate({CARBON}[$__rate_interval])) * 3.6",
                    "{{k8s_namespace_name}}",
                ),
            ),
            defaults={"decimals": 3},
        ),
        Panel(
            "bargauge",
            "Energy by namespace",
            "GPU energy in the dashboard's time range.",
            "kwatth",
            (
                Target(
                    f"sum by (k8s_namespace_name) (increase({ENERGY}[$__range])) / {KWH}",
                    "{{k8s_namespace_name}}",
                    instant=True,
                ),
            ),
        ),
        Panel(
            "bargauge",
            "Emissions by namespace",
            "kgCO2e in the dashboard's time range.",
            "masskg",
            (
                Target(
                    f"sum by (k8s_namespace_name) (increase({CARBON}[$__range])) / 1000",
                    "{{k8s_namespace_name}}",
                    instant=True,
                ),
            ),
        ),
    ]


def _top_workloads() -> list[Panel]:
    """Each workload with its team and owner (the top of its owner chain)."""
    by = "k8s_namespace_name, workload, team, owner_kind, owner_name"
    energy = f"increase({ENERGY}[$__range]) {OWNER_JOIN}"
    carbon = f"increase({CARBON}[$__range]) {OWNER_JOIN}"
    return [
        Panel(
            "table",
            "Top workloads by energy",
            "The 15 workloads that used most GPU energy in the time range, with their "
            "team and owner.",
            "kwatth",
            (Target(f"topk(15, sum by ({by}) ({energy}) / {KWH})", "", instant=True),),
        ),
        Panel(
            "table",
            "Top workloads by emissions",
            "The 15 workloads with most kgCO2e in the time range, with their team and owner.",
            "masskg",
            (Target(f"topk(15, sum by ({by}) ({carbon}) / 1000)", "", instant=True),),
        ),
    ]


def _measurement() -> list[Panel]:
    return [
        Panel(
            "stat",
            "Carbon intensity in use (PUE x grid)",
            "Grams CO2e per GPU kWh over the last hour, across the fleet: the PUE times the "
            "grid intensity of each node's region, weighted by energy.",
            "suffix: gCO2e/kWh",
            (
                Target(
                    "sum(rate(gpufleet_workload_carbon_grams_total[1h])) / "
                    f"(sum(rate(gpufleet_workload_energy_joules_total[1h])) / {KWH})",
                    "intensity",
                    instant=True,
                ),
            ),
            width=6,
            defaults={"decimals": 0},
        ),
        Panel(
            "stat",
            "PUE",
            "Power usage effectiveness the collector applies (carbon.pue): facility energy "
            "per unit of IT energy.",
            "none",
            (Target("gpufleet_carbon_pue_ratio", "PUE", instant=True),),
            width=4,
            defaults={"decimals": 2},
        ),
        Panel(
            "timeseries",
            "Grid carbon intensity by region",
            "The grid intensity (gCO2e/kWh, before PUE) the collector uses for each region "
            "its nodes are in: the shipped yearly table, or the hourly feed where one is set.",
            "suffix: gCO2e/kWh",
            (Target("gpufleet_carbon_intensity_grams_per_kilowatt_hour", "{{region}}"),),
            width=14,
            defaults={"decimals": 0},
        ),
        *_energy_sources(),
    ]


def _energy_sources() -> list[Panel]:
    return [
        Panel(
            "stat",
            "How GPU energy is measured",
            "GPU energy in the time range by how it was measured. counter: read from NVML's "
            "total-energy counter (exact). estimate: integrated from power samples on GPUs "
            "without one.",
            "kwatth",
            (
                Target(
                    f"(sum(increase({ENERGY}[$__range])) - "
                    f"sum(increase({ESTIMATED}[$__range]))) / {KWH}",
                    "counter",
                    instant=True,
                ),
                Target(
                    f"sum(increase({ESTIMATED}[$__range])) / {KWH}",
                    "estimate",
                    instant=True,
                ),
            ),
            width=8,
            options={"textMode": "value_and_name", "graphMode": "none"},
        ),
        Panel(
            "timeseries",
            "GPU energy counters against attributed energy",
            "The agents' NVML energy counters summed over the fleet, and the energy the "
            "collector attributed to workloads; they should agree.",
            "watt",
            (
                Target("sum(rate(gpufleet_gpu_energy_joules_total[$__rate_interval]))", "counters"),
                Target(
                    "sum(rate(gpufleet_workload_energy_joules_total[$__rate_interval]))",
                    "attributed",
                ),
            ),
            width=16,
        ),
    ]
