"""The energy-and-carbon and the workload-detail dashboards.

Energy and carbon per workload come from the collector's counters (joules and grams since
the ledger began); a workload's GPUs come from the agents' ``gpufleet_gpu_workload_info``,
which lists every workload holding a GPU (shared GPUs included), joined on node and uuid.
"""

from __future__ import annotations

from gpufleet.dashboards_fleet import MONEY, WORKLOAD_UID, currency_variable
from gpufleet.dashboards_grafana import Json, Panel, Target, dashboard, query_variable

ENERGY_UID = "gpufleet-energy"
KWH = "3600000"
ENERGY = 'gpufleet_workload_energy_joules_total{k8s_namespace_name=~"$namespace"}'
CARBON = 'gpufleet_workload_carbon_grams_total{k8s_namespace_name=~"$namespace"}'
#: keeps the left-hand GPU series of the GPUs that $workload holds
HELD = 'and on (node, uuid) gpufleet_gpu_workload_info{workload_key="$workload"}'
GPU_LEGEND = "{{node}} GPU {{gpu}}"


def _namespace_variable(metric: str) -> Json:
    query = f"label_values({metric}, k8s_namespace_name)"
    return query_variable("namespace", "Namespace", query, multi=True)


def energy_carbon() -> Json:
    return dashboard(
        ENERGY_UID,
        "gpufleet / Energy and carbon",
        "GPU energy (kWh) and emissions (kgCO2e) by workload and namespace, the carbon "
        "intensity in use, and how each GPU's energy is measured.",
        [*_by_namespace(), *_top_workloads(), *_measurement()],
        [_namespace_variable("gpufleet_workload_energy_joules_total")],
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
    by = "k8s_namespace_name, workload, team"
    return [
        Panel(
            "table",
            "Top workloads by energy",
            "The 15 workloads that used most GPU energy in the time range.",
            "kwatth",
            (
                Target(
                    f"topk(15, sum by ({by}) (increase({ENERGY}[$__range])) / {KWH})",
                    "",
                    instant=True,
                ),
            ),
        ),
        Panel(
            "table",
            "Top workloads by emissions",
            "The 15 workloads with most kgCO2e in the time range.",
            "masskg",
            (
                Target(
                    f"topk(15, sum by ({by}) (increase({CARBON}[$__range])) / 1000)",
                    "",
                    instant=True,
                ),
            ),
        ),
    ]


def _measurement() -> list[Panel]:
    return [
        Panel(
            "stat",
            "Carbon intensity in use (PUE x grid)",
            "Grams CO2e per GPU kWh over the last hour, across the fleet: the PUE times the "
            "grid intensity of each node's region, weighted by energy. The collector does not "
            "export PUE and grid intensity separately.",
            "suffix: gCO2e/kWh",
            (
                Target(
                    "sum(rate(gpufleet_workload_carbon_grams_total[1h])) / "
                    f"(sum(rate(gpufleet_workload_energy_joules_total[1h])) / {KWH})",
                    "intensity",
                    instant=True,
                ),
            ),
            width=8,
            defaults={"decimals": 0},
        ),
        Panel(
            "stat",
            "How GPU energy is measured",
            "counter: GPUs whose NVML total-energy counter is read (exact). estimate: GPUs "
            "without one, whose energy is integrated from power samples.",
            "none",
            (
                Target("count(gpufleet_gpu_energy_joules_total)", "counter", instant=True),
                Target(
                    "count(gpufleet_gpu_power_watts unless on (node, uuid) "
                    "gpufleet_gpu_energy_joules_total) or vector(0)",
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
            width=8,
        ),
    ]


def workload_detail() -> Json:
    namespace = _namespace_variable("gpufleet_gpu_workload_info")
    workload = query_variable(
        "workload",
        "Workload (pod or Slurm job)",
        'label_values(gpufleet_gpu_workload_info{k8s_namespace_name=~"$namespace"}, workload_key)',
    )
    return dashboard(
        WORKLOAD_UID,
        "gpufleet / Workload detail",
        "One workload (a Kubernetes pod or a Slurm job): its GPUs' activity, memory, power, "
        "energy and idle episodes.",
        [*_workload_totals(), *_workload_gpus()],
        [currency_variable(), namespace, workload],
    )


def _gpu_series(title: str, description: str, unit: str, metric: str, **defaults: object) -> Panel:
    target = Target(f"{metric} {HELD}", GPU_LEGEND)
    return Panel("timeseries", title, description, unit, (target,), defaults=dict(defaults))


def _total_stat(title: str, description: str, unit: str, expr: str, **defaults: object) -> Panel:
    target = Target(expr, title, instant=True)
    return Panel("stat", title, description, unit, (target,), 6, 4, defaults=dict(defaults))


def _workload_totals() -> list[Panel]:
    selector = '{workload="$workload"}'
    money = '{workload="$workload", currency="$currency"}'
    return [
        _total_stat(
            "Energy",
            "GPU energy attributed to the workload in the time range.",
            "kwatth",
            f"sum(increase(gpufleet_workload_energy_joules_total{selector}[$__range])) / {KWH}",
        ),
        _total_stat(
            "Emissions",
            "kgCO2e of that energy.",
            "masskg",
            f"sum(increase(gpufleet_workload_carbon_grams_total{selector}[$__range])) / 1000",
        ),
        _total_stat(
            "Idle GPU-hours",
            "GPU-hours the workload held idle GPUs in the time range.",
            "h",
            f"sum(increase(gpufleet_workload_idle_gpu_seconds_total{selector}[$__range])) / 3600",
            decimals=2,
        ),
        _total_stat(
            "Idle cost ($currency)",
            "What those idle GPU-hours cost.",
            "short",
            f"sum(increase(gpufleet_workload_waste_total{money}[$__range]))",
            **MONEY,
        ),
    ]


def _workload_gpus() -> list[Panel]:
    return [
        _gpu_series(
            "SM activity",
            "Per GPU held: SM activity 0..1 (GPM, or NVML's coarse utilisation).",
            "percentunit",
            "gpufleet_gpu_sm_activity_ratio",
            min=0,
            max=1,
        ),
        _gpu_series(
            "DRAM activity",
            "Per GPU held: device memory bandwidth activity 0..1.",
            "percentunit",
            "gpufleet_gpu_dram_activity_ratio",
            min=0,
            max=1,
        ),
        _gpu_series(
            "Memory used",
            "Per GPU held: device memory in use (held memory does not make a GPU active).",
            "bytes",
            "gpufleet_gpu_memory_used_bytes",
        ),
        _gpu_series("Power", "Per GPU held: power draw.", "watt", "gpufleet_gpu_power_watts"),
        Panel(
            "timeseries",
            "Idle episodes",
            "How long each GPU labelled with this workload has been idle; each ramp is one "
            "idle episode, a drop to 0 is activity ending it.",
            "s",
            (Target('gpufleet_gpu_idle_seconds{workload="$workload"}', GPU_LEGEND),),
        ),
        Panel(
            "timeseries",
            "Energy rate",
            "Energy attributed to the workload per second (average power).",
            "watt",
            (
                Target(
                    'sum(rate(gpufleet_workload_energy_joules_total{workload="$workload"}'
                    "[$__rate_interval]))",
                    "attributed",
                ),
            ),
        ),
    ]
