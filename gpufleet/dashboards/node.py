"""The node-and-GPU-detail dashboard: health and hardware of chosen nodes and GPUs.

Everything here comes straight from the agents' /metrics (``gpufleet_gpu_*``), so it works
even when the collector is down.
"""

from __future__ import annotations

from gpufleet.dashboards.grafana import Json, Panel, Target, dashboard, data_link, query_variable

NODE_UID = "gpufleet-node"
SEL = 'node=~"$node", gpu=~"$gpu"'
GPU_LEGEND = "{{node}} GPU {{gpu}}"


def _series(title: str, description: str, unit: str, *exprs: tuple[str, str]) -> Panel:
    targets = tuple(Target(expr, legend) for expr, legend in exprs)
    return Panel("timeseries", title, description, unit, targets)


def _stat(title: str, description: str, expr: str, legend: str) -> Panel:
    target = Target(expr, legend, instant=True)
    options = {"textMode": "value_and_name", "graphMode": "none"}
    return Panel("stat", title, description, "none", (target,), 6, 4, options=options)


def node_detail() -> Json:
    node = query_variable("node", "Node", "label_values(gpufleet_gpu_info, node)", multi=True)
    gpu = query_variable(
        "gpu", "GPU", 'label_values(gpufleet_gpu_info{node=~"$node"}, gpu)', multi=True
    )
    return dashboard(
        NODE_UID,
        "gpufleet / Node and GPU detail",
        "Temperature, clocks, power, throttle reasons, XID and ECC errors, and an activity "
        "heatmap of the chosen nodes' GPUs.",
        [*_errors(), _heatmap(), *_hardware()],
        [node, gpu],
    )


def _errors() -> list[Panel]:
    return [
        _stat(
            "XID events",
            "XID events the agents saw in the time range (none is 0).",
            f"sum(increase(gpufleet_gpu_xid_errors_total{{{SEL}}}[$__range])) or vector(0)",
            "XID",
        ),
        _stat(
            "ECC errors by type",
            "Volatile ECC errors in the time range; uncorrected ones kill the GPU's jobs.",
            f"sum by (type) (increase(gpufleet_gpu_ecc_errors_total{{{SEL}}}[$__range]))",
            "{{type}}",
        ),
        _stat(
            "Unhealthy GPUs",
            "GPUs whose latest NVML read failed (fallen off the bus or erroring).",
            f"count(gpufleet_gpu_healthy{{{SEL}}} == 0) or vector(0)",
            "unhealthy",
        ),
        _stat(
            "Throttled GPUs by reason",
            "GPUs with each clocks-event (throttle) reason active now; gpu_idle is normal.",
            f"sum by (reason) (gpufleet_gpu_throttle_reason{{{SEL}}})",
            "{{reason}}",
        ),
    ]


def _heatmap() -> Panel:
    return Panel(
        "status-history",
        "SM activity per GPU (heatmap)",
        "One row per GPU, coloured by SM activity: dark rows are idle GPUs.",
        "percentunit",
        (Target(f"gpufleet_gpu_sm_activity_ratio{{{SEL}}}", GPU_LEGEND),),
        width=24,
        height=10,
        defaults={
            "min": 0,
            "max": 1,
            "color": {"mode": "continuous-BlYlRd"},
            "links": [_node_link()],
        },
        options={"showValue": "never", "rowHeight": 0.9},
    )


def _node_link() -> Json:
    return data_link("This node only", NODE_UID, node="${__field.labels.node}")


def _hardware() -> list[Panel]:
    return [
        _series(
            "Temperature",
            "GPU core and HBM temperature.",
            "celsius",
            (f"gpufleet_gpu_temperature_celsius{{{SEL}}}", f"{GPU_LEGEND} core"),
            (f"gpufleet_gpu_memory_temperature_celsius{{{SEL}}}", f"{GPU_LEGEND} HBM"),
        ),
        _series(
            "SM clock",
            "SM clock frequency; a drop under load with a throttle reason active is throttling.",
            "hertz",
            (f"gpufleet_gpu_sm_clock_hertz{{{SEL}}}", GPU_LEGEND),
        ),
        _series(
            "Power and limit",
            "Power draw and the enforced power limit.",
            "watt",
            (f"gpufleet_gpu_power_watts{{{SEL}}}", GPU_LEGEND),
            (f"gpufleet_gpu_power_limit_watts{{{SEL}}}", f"{GPU_LEGEND} limit"),
        ),
        _series(
            "Memory used",
            "Device memory in use and capacity.",
            "bytes",
            (f"gpufleet_gpu_memory_used_bytes{{{SEL}}}", GPU_LEGEND),
        ),
        _series(
            "Throttle reasons active",
            "GPUs with each throttle reason active over time.",
            "none",
            (f"sum by (reason) (gpufleet_gpu_throttle_reason{{{SEL}}})", "{{reason}}"),
        ),
        _series(
            "Agent read time",
            "Wall time the agent's latest read of all of a node's GPUs took.",
            "s",
            ('gpufleet_agent_last_read_seconds{node=~"$node"}', "{{node}}"),
        ),
    ]
