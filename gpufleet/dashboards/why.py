"""The "Why it wastes" panels of the idle-waste dashboard (issue 24).

From the collector's verdict metrics (collector/metrics/verdicts.py): the money a busy
workload leaves unused per hour by its likely bottleneck, the workloads that leave the
most with what to try (the cause's advice, a value mapping: the sentence is no label, so
label values stay bounded: cause and workload), the money spent on broken GPUs per node
and the GPUs each short node lacks.
"""

from __future__ import annotations

from gpufleet.dashboards.fleet import MONEY
from gpufleet.dashboards.grafana import Json, Panel, Target

UNUSED = (
    'gpufleet_workload_bottleneck_unused_cost_per_hour{currency="$currency", '
    'k8s_namespace_name=~"$namespace"}'
)
FAULT = 'gpufleet_gpu_fault_cost_per_hour{currency="$currency"}'
#: what to try, by cause: collector/analysis/verdicts.py's ADVICE (the dashboards may not
#: import the collector; tests/dashboards/test_why.py holds the two the same)
ADVICE = {
    "input_bound": "try more data-loader workers or CPU",
    "host_cpu_bound": "raise the job's CPU limit",
    "communication_bound": "overlap communication with compute or use fewer, larger GPUs",
    "memory_bandwidth_bound": "fuse kernels or use larger batches",
    "throttled": "check the GPU's cooling and power cap",
    "no_tensor_cores": "enable mixed precision (BF16/FP16 or TF32)",
    "straggler": "move the job off the slow GPU or fix its cooling",
    "gpu_fault": "drain the node and have the GPU checked",
}


def cause_sentences() -> Json:
    """A value mapping: each cause shown as "input-bound: try more data-loader workers"."""
    options = {
        cause: {"text": f"{cause.replace('_', '-')}: {advice}", "index": i}
        for i, (cause, advice) in enumerate(ADVICE.items())
    }
    return {"type": "value", "options": options}


def why_it_wastes() -> list[Panel]:
    return [
        Panel(
            "timeseries",
            "Why it wastes: unused money by cause ($currency/h)",
            "Money per hour that busy-looking workloads leave unused, by their likely "
            "bottleneck (input-bound, host-CPU-bound, communication-bound, memory-bandwidth-"
            "bound, throttled, no tensor cores, straggler, GPU fault): the bottleneck "
            "recommendations' verdicts.",
            "short",
            (Target(f"sum by (cause) ({UNUSED})", "{{cause}}"),),
            width=12,
            defaults=MONEY,
        ),
        Panel(
            "table",
            "Why it wastes: the most bottlenecked workloads",
            "The 10 workload-cause pairs leaving the most money unused per hour, with what to "
            "try; gpufleet report --bottlenecks and the console say why, with the evidence.",
            "short",
            (
                Target(
                    f"topk(10, sum by (k8s_namespace_name, workload, cause) ({UNUSED}))",
                    "",
                    instant=True,
                ),
            ),
            width=12,
            defaults={**MONEY, "mappings": [cause_sentences()]},
        ),
        Panel(
            "bargauge",
            "Money on broken GPUs by node ($currency/h)",
            "Money per hour spent on GPUs workloads hold while off the bus, logging hardware "
            "XIDs, with uncorrected ECC errors or row remaps pending, or throttled.",
            "short",
            (
                Target(
                    f"sum by (node, condition) ({FAULT})", "{{node}} {{condition}}", instant=True
                ),
            ),
            width=12,
            defaults=MONEY,
        ),
        Panel(
            "bargauge",
            "GPUs missing per node",
            "GPUs a node lacks against what it should have (the most it reported, or "
            "analysis.expected_gpus_per_node / its expected_gpus label): off the bus or gone "
            "from NVML. actions.remediation cordons or drains such a node when enabled.",
            "none",
            (Target("max by (node) (gpufleet_node_gpus_missing)", "{{node}}", instant=True),),
            width=12,
            defaults={"decimals": 0},
        ),
    ]
