"""Pricing-plan advice: reserved for steadily allocated GPUs, on demand for bursty ones.

Usage comes per (model, node), because the price book's per-node overrides may give a node
its own prices and plan (an on-prem box already paid for, a node already reserved). Nodes
are grouped by the price entry they pay; each group is judged at its own prices and plan,
so a node already on reserved pricing is never counted at the on-demand price.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from collector.analysis.cost import ModelPrice, canonical_model
from collector.recommend.rules import RuleContext, make
from collector.records import ModelUsage, Recommendation, RecommendationKind

#: one group: the GPU model and the price entry its nodes pay
_Group = tuple[str, ModelPrice]


def pricing_plan(models: Sequence[ModelUsage], ctx: RuleContext) -> list[Recommendation]:
    """Per model and price entry: reserved when its GPUs are allocated more than
    break-even + margin of the time, on demand when less than break-even - margin (the
    margin is hysteresis). Nodes without a price are left out."""
    groups: dict[_Group, list[ModelUsage]] = defaultdict(list)
    for usage in models:
        entry = ctx.prices.model_price(usage.model, usage.node)
        if entry is not None:
            groups[(canonical_model(usage.model), entry)].append(usage)
    out = []
    for (model, entry), usages in sorted(groups.items(), key=lambda g: _subject(g[0], g[1], ctx)):
        rec = _pricing(model, entry, usages, ctx)
        if rec is not None:
            out.append(rec)
    return out


def _subject(group: _Group, usages: Sequence[ModelUsage], ctx: RuleContext) -> str:
    """``model:H100`` for the nodes at the book's price; the nodes named where an override
    sets their own."""
    model, entry = group
    if entry == ctx.prices.models.get(model):
        return f"model:{model}"
    return f"model:{model}@{','.join(sorted(u.node for u in usages))}"


def _pricing(
    model: str, entry: ModelPrice, usages: Sequence[ModelUsage], ctx: RuleContext
) -> Recommendation | None:
    gpu_count = sum(u.gpu_count for u in usages)
    observed = sum(u.observed_seconds for u in usages)
    coverage = ctx.policy.pricing_min_coverage * ctx.settings.pricing_lookback_seconds
    if gpu_count <= 0 or observed <= 0 or observed < coverage * gpu_count:
        return None
    allocated = sum(u.allocated_seconds for u in usages) / observed
    od, res = entry.on_demand_per_gpu_hour, entry.reserved_per_gpu_hour
    break_even = res / od if od > 0 else 1.0
    margin = ctx.policy.pricing_margin
    if entry.current_plan == "on_demand" and allocated >= break_even + margin:
        target, money = "reserved", (od * allocated - res) * gpu_count
    elif entry.current_plan == "reserved" and allocated <= break_even - margin:
        target, money = "on_demand", (res - od * allocated) * gpu_count
    else:
        return None
    nodes = sorted(u.node for u in usages)
    evidence: dict[str, object] = {
        "window_seconds": ctx.settings.pricing_lookback_seconds,
        "observed_seconds_per_gpu": observed / gpu_count,
        "allocated_fraction": allocated,
        "active_fraction": sum(u.active_seconds for u in usages) / observed,
        "break_even": break_even,
        "margin": margin,
        "gpu_count": gpu_count,
        "nodes": nodes,
        "current_plan": entry.current_plan,
        "price_per_gpu_hour": {"on_demand": od, "reserved": res},
    }
    where = "" if len(nodes) > 3 else f" on {', '.join(nodes)}"
    return make(
        RecommendationKind.PRICING_PLAN,
        _subject((model, entry), usages, ctx),
        ctx,
        title=f"Switch {gpu_count} {model} GPU(s){where} to {target}: "
        f"allocated {allocated:.0%} vs break-even {break_even:.0%}",
        evidence=evidence,
        savings=ctx.savings(money, 0.0, evidence_seconds=observed / gpu_count),
    )
