"""The workload-detail dashboard: one workload's totals and the GPUs it holds.

Totals come from the collector's per-workload counters; a workload's GPUs come from the
agents' ``gpufleet_gpu_workload_info``, which lists every workload holding a GPU (shared
GPUs included), joined on node and uuid.
"""

from __future__ import annotations

from gpufleet.dashboards.energy import KWH, namespace_variable
from gpufleet.dashboards.fleet import MONEY, WORKLOAD_UID, currency_variable
from gpufleet.dashboards.grafana import Json, Panel, Target, dashboard, query_variable

#: keeps the left-hand GPU series of the GPUs that $workload holds
HELD = 'and on (node, uuid) gpufleet_gpu_workload_info{workload_key="$workload"}'
GPU_LEGEND = "{{node}} GPU {{gpu}}"


def workload_detail() -> Json:
    namespace = namespace_variable("gpufleet_gpu_workload_info")
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
