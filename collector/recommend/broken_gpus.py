"""Broken-GPU recommendations (issue 24 item 4): one per node with GPUs missing, lost or
held while broken.

A node is short when fewer GPUs report fresh, healthy samples than it should have: the
most it ever reported (a GPU that fell off the bus, or that NVML no longer lists, goes
silent while its peers keep reporting), or the count configured in
``analysis.expected_gpus_per_node`` or the node's ``expected_gpus`` label (the label
wins). GPUs a workload holds while off the bus, XID-faulted, ECC-degraded or throttled
are priced by collector/analysis/broken_gpus.py. The evidence gives the money spent on
the broken GPUs, per workload and per condition, what the missing GPUs cost, and the
node's remaining-but-crippled capacity (its working GPUs: a job sized for the whole node
no longer fits); the saving is the money spent on broken and missing GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from collector.analysis.broken_gpus import (
    HeldBroken,
    NodeGpuCount,
    count_gpus,
    held_broken,
    money_by,
)
from collector.analysis.verdicts import BottleneckPolicy
from collector.analysis.work_window import WorkloadWindow
from collector.recommend.bottleneck import window_prices
from collector.recommend.rules import RuleContext, make
from collector.records import GpuView, Recommendation, RecommendationKind

#: the node label that sets a node's expected GPU count (over the setting)
EXPECTED_LABEL = "expected_gpus"


def broken_gpus(
    gpus: Sequence[GpuView],
    windows: Sequence[WorkloadWindow],
    ctx: RuleContext,
    node_labels: Mapping[str, Mapping[str, str]],
    policy: BottleneckPolicy | None = None,
) -> list[Recommendation]:
    rules = policy or BottleneckPolicy()
    prices = window_prices(windows, ctx)
    held: dict[str, list[HeldBroken]] = {}
    for b in held_broken(windows, prices, rules):
        held.setdefault(b.node, []).append(b)
    default = ctx.settings.expected_gpus_per_node or None
    counts = {
        c.node: c
        for c in count_gpus(
            gpus,
            ctx.now,
            ctx.settings.stale_after_seconds,
            lambda node: expected_gpus(node_labels.get(node, {})) or default,
        )
    }
    index = {g.uuid: g.index for g in gpus}
    nodes = sorted(set(held) | set(counts))
    return [_recommendation(n, held.get(n, []), counts.get(n), index, ctx) for n in nodes]


def expected_gpus(labels: Mapping[str, str]) -> int | None:
    """The node's ``expected_gpus`` label as a count; None when absent or not a count."""
    value = labels.get(EXPECTED_LABEL, "").strip()
    return int(value) if value.isdigit() else None


def _recommendation(
    node: str,
    held: list[HeldBroken],
    count: NodeGpuCount | None,
    index: Mapping[str, int],
    ctx: RuleContext,
) -> Recommendation:
    broken = sum(b.money_per_hour for b in held)
    missing = count.missing if count else ()
    missing_money = sum(ctx.gpu_price(g) for g in missing)
    crippled = sum(ctx.gpu_price(g) for g in count.working) if count else 0.0
    seconds = ctx.settings.bottleneck_window_seconds
    savings = ctx.savings(broken + missing_money, 0.0, node, evidence_seconds=seconds)
    evidence: dict[str, object] = {
        "node": node,
        "broken_per_hour": broken,
        "missing_per_hour": missing_money,
        "crippled_capacity_per_hour": crippled,
        "broken_by_condition": money_by(held, lambda b: b.condition.value),
    }
    if count is not None:  # the node is short
        evidence["expected_gpus"] = count.expected
        evidence["working_gpus"] = len(count.working)
    evidence |= {
        "missing_gpus": [g.uuid for g in missing],
        "lost_gpus": [g.uuid for g in count.lost] if count else [],
        "broken_by_workload": money_by(held, lambda b: b.workload_key),
        "broken": [_broken(b, index) for b in held],
    }
    uuids = sorted({b.uuid for b in held} | {g.uuid for g in missing})
    return make(
        RecommendationKind.BROKEN_GPUS,
        node,
        ctx,
        title=_title(node, held, count, crippled, savings.currency, broken + missing_money),
        evidence=evidence,
        savings=savings,
        gpu_uuids=tuple(uuids),
        node=node,
    )


def _broken(b: HeldBroken, index: Mapping[str, int]) -> dict[str, object]:
    return {
        "gpu": b.uuid,
        "index": index.get(b.uuid),
        "workload": b.workload_key,
        "condition": b.condition.value,
        "share": b.share,
        "money_per_hour": b.money_per_hour,
        "xids": list(b.xids),
    }


def _title(
    node: str,
    held: list[HeldBroken],
    count: NodeGpuCount | None,
    crippled: float,
    currency: str,
    money: float,
) -> str:
    parts = []
    if count is not None:
        parts.append(f"{len(count.working)} of {count.expected} GPUs working")
    if held:
        conditions = ", ".join(sorted({b.condition.value.replace("_", " ") for b in held}))
        parts.append(f"{len(held)} held while broken ({conditions})")
    head = f"{node}: {'; '.join(parts)}; {money:.2f} {currency}/h spent on broken GPUs"
    if count is not None:
        head += f", {crippled:.2f} {currency}/h on its remaining, crippled capacity"
    return head + "; drain the node and have its GPUs checked"
