"""Pricing-plan advice: a reserved baseline for the GPUs busy most of the time, on demand
for the peaks ("reserve 12 of 20 H100 on a 1-year plan, keep 8 on demand").

Per pool (a model and the price entry its nodes pay: collector/analysis/plan_groups.py)
the allocation curve over the look-back gives each GPU layer's share of hours in use;
collector/analysis/plans.py turns it into the cheapest mix. Hysteresis: the count
reserved today, or the one a standing recommendation asks for, stands while it stays
within ``pricing_margin`` of the break-even, so the advice does not flap between 11 and
12. No advice without ``pricing_min_coverage_seconds`` of data per GPU (a week by
default), nor where no commitment costs less than on demand (an on-prem box).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from collector.analysis.plan_groups import PlanGroup, group_prices, plan_groups
from collector.analysis.plans import (
    ASSUMPTION,
    RISK_USAGE_DROP,
    Mix,
    WhatIf,
    break_even,
    sticky_count,
    what_if,
)
from collector.analysis.price_plans import ON_DEMAND, PLAN_TITLES
from collector.recommend.rules import RuleContext, make
from collector.records import (
    LIVE_STATUSES,
    MONTH_HOURS,
    ModelHour,
    ModelUsage,
    Recommendation,
    RecommendationKind,
)


def pricing_plan(
    models: Sequence[ModelUsage],
    hours: Sequence[ModelHour],
    ctx: RuleContext,
    standing: Mapping[str, Recommendation],
) -> list[Recommendation]:
    """One recommendation per pool whose cheapest mix differs from what it buys today;
    ``standing``: the stored recommendations by id (their counts anchor the hysteresis)."""
    out = []
    for group in plan_groups(models, hours, ctx.prices):
        rec = _pricing(group, ctx, standing)
        if rec is not None:
            out.append(rec)
    return out


def _pricing(
    group: PlanGroup, ctx: RuleContext, standing: Mapping[str, Recommendation]
) -> Recommendation | None:
    if not group.hour_starts or group.coverage_seconds < ctx.policy.pricing_min_coverage_seconds:
        return None
    prices = group_prices(group.entry, group.gpu_count, ctx.settings.pricing_max_term_months)
    if not prices.commitments:
        return None
    first = what_if(group.allocated_gpus, group.active_gpus, group.gpu_count, prices)
    cheapest = min(prices.commitments, key=lambda p: p.per_gpu_hour).name
    mix = _sticky(first, cheapest, group, ctx, standing)
    plans = what_if(group.allocated_gpus, group.active_gpus, group.gpu_count, prices, mix)
    if mix == plans.today or plans.saving <= 0:
        return None
    per_hour = plans.saving / plans.hours
    evidence = _evidence(group, plans, ctx)
    return make(
        RecommendationKind.PRICING_PLAN,
        group.subject,
        ctx,
        title=title(group.model, plans, per_hour * MONTH_HOURS, ctx.prices.currency),
        evidence=evidence,
        savings=ctx.savings(per_hour, 0.0, evidence_seconds=group.coverage_seconds),
    )


def _sticky(
    plans: WhatIf,
    cheapest: str,
    group: PlanGroup,
    ctx: RuleContext,
    standing: Mapping[str, Recommendation],
) -> Mix:
    """The optimum, or the count held now (a standing recommendation's, else today's)
    while it is within the margin of the break-even."""
    best = plans.recommended if plans.recommended.plan != ON_DEMAND else Mix(cheapest, 0)
    held = _held(group, plans, best.plan, standing)
    od = group.entry.on_demand_per_gpu_hour
    threshold = break_even(group.entry.plan(best.plan) or group.entry.options()[0], od)
    count = sticky_count(plans.fractions, threshold, held, ctx.policy.pricing_margin)
    return Mix(best.plan, count) if count else Mix(ON_DEMAND, 0)


def _held(
    group: PlanGroup, plans: WhatIf, plan: str, standing: Mapping[str, Recommendation]
) -> int:
    rec = standing.get(f"{RecommendationKind.PRICING_PLAN.value}:{group.subject}")
    if rec is not None and rec.status in LIVE_STATUSES:
        recommended = rec.evidence.get("recommended")
        if isinstance(recommended, dict) and recommended.get("plan") == plan:
            return int(recommended.get("gpus", 0))
    return plans.today.reserved_gpus if plans.today.plan == plan else 0


def title(model: str, plans: WhatIf, saving_per_month: float, currency: str) -> str:
    """Plain words: "Reserve 12 of 20 H100 on a 1-year plan, keep 8 on demand: ..."."""
    mix, count = plans.recommended, plans.gpu_count
    money = f"saves {saving_per_month:,.0f} {currency} a month"
    if mix.plan == ON_DEMAND:
        return f"Keep all {count} {model} on demand (no reservation): {money}"
    rest = count - mix.reserved_gpus
    keep = f", keep {rest} on demand" if rest > 0 else ""
    return (
        f"Reserve {mix.reserved_gpus} of {count} {model} on {PLAN_TITLES[mix.plan]}{keep}: {money}"
    )


def _evidence(group: PlanGroup, plans: WhatIf, ctx: RuleContext) -> dict[str, object]:
    od = group.entry.on_demand_per_gpu_hour
    month = MONTH_HOURS / plans.hours
    return {
        "window_seconds": ctx.settings.pricing_lookback_seconds,
        "hours": plans.hours,
        "coverage_seconds_per_gpu": group.coverage_seconds,
        "gpu_count": group.gpu_count,
        "nodes": list(group.nodes),
        "use_fractions": [round(f, 4) for f in plans.fractions],
        "break_even": {p.name: break_even(p, od) for p in group.entry.options() if p.commitment},
        "margin": ctx.policy.pricing_margin,
        "today": {"plan": plans.today.plan, "gpus": plans.today.reserved_gpus},
        "recommended": {"plan": plans.recommended.plan, "gpus": plans.recommended.reserved_gpus},
        "cost_per_month": {
            "today": plans.costs.today * month,
            "recommended": plans.costs.recommended * month,
            "all_on_demand": plans.costs.all_on_demand * month,
            "all_reserved": plans.costs.all_reserved * month,
        },
        "risk": {
            "usage_drop": RISK_USAGE_DROP,
            "saving_per_month": plans.saving_if_usage_drops * month,
        },
        "price_per_gpu_hour": {p.name: p.per_gpu_hour for p in group.entry.options()},
        "assumption": ASSUMPTION,
    }
