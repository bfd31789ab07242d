"""Bottleneck recommendations (issue 24): one per workload whose GPUs a bottleneck holds back.

Each carries the workload's verdicts (collector/analysis/bottleneck.py), their evidence and
the money each accounts for; the saving is the workload's unused share (price x GPUs x
(1 - used share)) the verdicts account for, which they never pass (the rest, if any,
is the evidence's ``unattributed_per_hour``). Its hysteresis is the other
kinds': ``lifecycle.reconcile`` resolves it only once no longer desired for
``resolve_after_seconds``.
"""

from __future__ import annotations

from collections.abc import Sequence

from collector.analysis.bottleneck import Diagnosis, describe, diagnose
from collector.analysis.verdicts import BottleneckPolicy
from collector.analysis.work_window import GpuWindow, WorkloadWindow
from collector.recommend.rules import RuleContext, make
from collector.records import Recommendation, RecommendationKind


def bottlenecks(
    windows: Sequence[WorkloadWindow], ctx: RuleContext, policy: BottleneckPolicy | None = None
) -> list[Recommendation]:
    """One per workload with a verdict, over its window."""
    rules = policy or BottleneckPolicy()
    prices = window_prices(windows, ctx)
    out = []
    for window in windows:
        diagnosis = diagnose(window, prices, rules)
        if diagnosis is not None:
            out.append(_recommendation(diagnosis, ctx))
    return out


def window_prices(windows: Sequence[WorkloadWindow], ctx: RuleContext) -> dict[str, float]:
    """Each window GPU's ``window_price`` by uuid, looked up once per (model, node): a
    price book lookup costs ~50,000 instructions (bench/collector_instructions)."""
    by_place: dict[tuple[str, str], float] = {}
    out = {}
    for window in windows:
        for gpu in window.gpus:
            price = by_place.get((gpu.model, gpu.node))
            if price is None:
                price = by_place[gpu.model, gpu.node] = window_price(gpu, ctx)
            out[gpu.uuid] = price
    return out


def window_price(gpu: GpuWindow, ctx: RuleContext) -> float:
    """A window GPU's hourly price at the plan its node pays now (0 when not in the book)."""
    entry = ctx.prices.model_price(gpu.model, gpu.node)
    return entry.per_gpu_hour(entry.current_plan) if entry is not None else 0.0


def _recommendation(d: Diagnosis, ctx: RuleContext) -> Recommendation:
    ref, window = d.window.workload, d.window
    money = sum(v.money_per_hour for v in d.verdicts)
    nodes = sorted({g.node for g in window.gpus})
    savings = ctx.savings(money, 0.0, nodes[0], evidence_seconds=window.seconds)
    evidence: dict[str, object] = {
        "window_seconds": window.seconds,
        "gpus": [g.uuid for g in window.gpus],
        "nodes": nodes,
        "model": d.model,
        "used_share": d.used_share,
        "price_per_hour": d.price_per_hour,
        "unused_per_hour": d.unused_per_hour,
        #: what no verdict explains: the verdicts and this add up to the unused share
        "unattributed_per_hour": d.unattributed_per_hour,
        "causes": [v.cause.value for v in d.verdicts],
        "verdicts": [
            {
                "cause": v.cause.value,
                "reason": v.reason,
                "advice": v.advice,
                "money_per_hour": v.money_per_hour,
                "gpus": list(v.gpu_uuids),
                **v.evidence,
            }
            for v in d.verdicts
        ],
        "note": d.note,
    }
    return make(
        RecommendationKind.BOTTLENECK,
        ref.key,
        ctx,
        title=f"{ref.key}: {describe(d, savings.currency)}",
        evidence=evidence,
        savings=savings,
        gpu_uuids=tuple(g.uuid for g in window.gpus),
        node=nodes[0] if len(nodes) == 1 else "",
        workload_key=ref.key,
        namespace=ref.namespace,
    )
