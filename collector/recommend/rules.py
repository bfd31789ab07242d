"""The recommendation rules: each turns the fleet view into the recommendations it wants now.

Savings per month use MONTH_HOURS (730 h). Money is in the price book's currency at the
price of the plan the fleet pays now (``current_plan``); energy is IT energy (kWh, before
PUE); carbon applies the site PUE and the node's grid intensity.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from collector.analysis.carbon import CarbonContext
from collector.analysis.cost import PriceBook
from collector.analysis.gpu_models import GpuCatalogue
from collector.config import AnalysisSettings
from collector.records import (
    MONTH_HOURS,
    GpuState,
    GpuView,
    ModelUsage,
    Recommendation,
    RecommendationKind,
    RecommendationStatus,
    Savings,
    WorkloadRef,
)


@dataclass(frozen=True)
class RecommendPolicy:
    """Knobs AnalysisSettings does not carry (yet)."""

    catalogue: GpuCatalogue
    #: right-sizing keeps this much memory and compute above the observed need
    right_size_headroom: float = 0.2
    #: pricing advice needs the allocated fraction this far past the break-even
    pricing_margin: float = 0.1
    #: pricing advice needs known data for this fraction of the look-back (GPU-seconds)
    pricing_min_coverage: float = 0.5

    @classmethod
    def default(cls) -> RecommendPolicy:
        return cls(catalogue=GpuCatalogue.default())


@dataclass(frozen=True)
class RuleContext:
    prices: PriceBook
    carbon: CarbonContext
    settings: AnalysisSettings
    policy: RecommendPolicy
    now: float

    def savings(self, money_per_hour: float, watts: float, node: str = "") -> Savings:
        kwh = max(0.0, watts) * MONTH_HOURS / 1000.0
        return Savings(
            money_per_month=money_per_hour * MONTH_HOURS,
            energy_kwh_per_month=kwh,
            carbon_kg_per_month=self.carbon.kg_for_kwh(kwh, node),
            currency=self.prices.currency,
            money_per_hour=money_per_hour,
        )

    def gpu_price(self, view: GpuView) -> float:
        """Hourly price of a GPU at its plan; a MIG slice costs its share of the parent
        and the parent what no slice covers (``GpuView.price_fraction``)."""
        entry = self.prices.model_price(view.model, view.node)
        if entry is None:
            return 0.0
        return entry.per_gpu_hour(entry.current_plan) * view.price_fraction

    def idle_watts(self, view: GpuView) -> float:
        """The power the GPU draws now, else its model's typical idle power."""
        if view.power_watts is not None:
            return view.power_watts
        model = self.policy.catalogue.get(view.model)
        return model.idle_watts * view.price_fraction if model else 0.0


def make(
    kind: RecommendationKind,
    subject: str,
    ctx: RuleContext,
    *,
    title: str,
    evidence: dict[str, object],
    savings: Savings,
    gpu_uuids: tuple[str, ...] = (),
    node: str = "",
    workload_key: str = "",
    namespace: str = "",
) -> Recommendation:
    """A desired recommendation; ``reconcile`` sets its real status and times."""
    return Recommendation(
        id=f"{kind.value}:{subject}",
        kind=kind,
        subject=subject,
        title=title,
        evidence=evidence,
        savings=savings,
        status=RecommendationStatus.OPEN,
        opened_at=ctx.now,
        updated_at=ctx.now,
        gpu_uuids=gpu_uuids,
        node=node,
        workload_key=workload_key,
        namespace=namespace,
    )


def release_idle(gpus: Sequence[GpuView], ctx: RuleContext) -> list[Recommendation]:
    """One per workload whose GPUs are *all* allocated-idle past the idle window.

    A workload with any GPU active or unknown gets none: a job using some of its GPUs is
    a right-sizing matter, and unknown data never triggers a release. A GPU shared by n
    workloads counts 1/n of its price and power towards each.
    """
    held: dict[str, tuple[WorkloadRef, list[GpuView]]] = {}
    for view in gpus:
        for ref in view.workloads:
            held.setdefault(ref.key, (ref, []))[1].append(view)
    window = ctx.settings.idle_window_seconds
    out = []
    for ref, views in held.values():
        starts = [v.idle_since for v in views if v.state is GpuState.ALLOCATED_IDLE]
        if len(starts) != len(views) or None in starts:
            continue
        idle_since = max(s for s in starts if s is not None)
        if ctx.now - idle_since >= window:
            out.append(_release(ref, views, idle_since, ctx))
    return out


def _release(
    ref: WorkloadRef, views: list[GpuView], idle_since: float, ctx: RuleContext
) -> Recommendation:
    money = sum(ctx.gpu_price(v) / len(v.workloads) for v in views)
    watts = sum(ctx.idle_watts(v) / len(v.workloads) for v in views)
    nodes = sorted({v.node for v in views})
    models = ", ".join(sorted({v.model for v in views}))
    savings = ctx.savings(money, watts, nodes[0])
    evidence: dict[str, object] = {
        "window_seconds": ctx.settings.idle_window_seconds,
        "idle_since": idle_since,
        "idle_seconds": ctx.now - idle_since,
        "gpus": [v.uuid for v in views],
        "nodes": nodes,
        "memory_used_bytes": sum(v.memory_used_bytes or 0 for v in views),
        "power_watts": watts,
        "price_per_hour": money,
    }
    title = (
        f"Release {len(views)} idle {models} GPU(s) held by {ref.key}: "
        f"{money:.2f} {savings.currency}/h"
    )
    return make(
        RecommendationKind.RELEASE_IDLE,
        ref.key,
        ctx,
        title=title,
        evidence=evidence,
        savings=savings,
        gpu_uuids=tuple(v.uuid for v in views),
        node=nodes[0] if len(nodes) == 1 else "",
        workload_key=ref.key,
        namespace=ref.namespace,
    )


def scale_down(gpus: Sequence[GpuView], ctx: RuleContext) -> list[Recommendation]:
    """One per node with unallocated GPUs idle past the window; "whole node" when all of
    the node's GPUs are."""
    by_node: dict[str, list[GpuView]] = defaultdict(list)
    for view in gpus:
        by_node[view.node].append(view)
    out = []
    for node, views in sorted(by_node.items()):
        idle = [v for v in views if _unallocated_idle(v, ctx)]
        if idle:
            out.append(_scale_down(node, idle, len(idle) == len(views), ctx))
    return out


def _unallocated_idle(view: GpuView, ctx: RuleContext) -> bool:
    return (
        view.state is GpuState.UNALLOCATED
        and not view.workloads
        and view.idle_seconds(ctx.now) >= ctx.settings.idle_window_seconds
    )


def _scale_down(node: str, idle: list[GpuView], whole: bool, ctx: RuleContext) -> Recommendation:
    money = sum(ctx.gpu_price(v) for v in idle)
    watts = sum(ctx.idle_watts(v) for v in idle)
    savings = ctx.savings(money, watts, node)
    since = max(v.idle_since or ctx.now for v in idle)
    what = (
        f"node {node} (all {len(idle)} GPUs idle, unallocated)"
        if whole
        else (f"{len(idle)} unallocated idle GPU(s) on {node}")
    )
    evidence: dict[str, object] = {
        "window_seconds": ctx.settings.idle_window_seconds,
        "idle_since": since,
        "idle_seconds": ctx.now - since,
        "gpus": [v.uuid for v in idle],
        "whole_node": whole,
        "power_watts": watts,
        "price_per_hour": money,
    }
    return make(
        RecommendationKind.SCALE_DOWN,
        node,
        ctx,
        title=f"Scale down {what}: {money:.2f} {savings.currency}/h",
        evidence=evidence,
        savings=savings,
        gpu_uuids=tuple(v.uuid for v in idle),
        node=node,
    )


def pricing_plan(models: Sequence[ModelUsage], ctx: RuleContext) -> list[Recommendation]:
    """Per model: reserved when its GPUs are allocated more than break-even + margin of
    the time, on demand when less than break-even - margin (the margin is hysteresis)."""
    out = []
    for usage in models:
        rec = _pricing(usage, ctx)
        if rec is not None:
            out.append(rec)
    return out


def _pricing(usage: ModelUsage, ctx: RuleContext) -> Recommendation | None:
    entry = ctx.prices.model_price(usage.model)
    coverage = ctx.policy.pricing_min_coverage * ctx.settings.pricing_lookback_seconds
    if entry is None or usage.gpu_count <= 0 or usage.observed_seconds < coverage * usage.gpu_count:
        return None
    allocated = usage.allocated_seconds / usage.observed_seconds
    break_even = ctx.prices.break_even_utilisation(usage.model)
    margin = ctx.policy.pricing_margin
    od, res = entry.on_demand_per_gpu_hour, entry.reserved_per_gpu_hour
    if entry.current_plan == "on_demand" and allocated >= break_even + margin:
        target, money = "reserved", (od * allocated - res) * usage.gpu_count
    elif entry.current_plan == "reserved" and allocated <= break_even - margin:
        target, money = "on_demand", (res - od * allocated) * usage.gpu_count
    else:
        return None
    evidence: dict[str, object] = {
        "window_seconds": ctx.settings.pricing_lookback_seconds,
        "allocated_fraction": allocated,
        "active_fraction": usage.active_seconds / usage.observed_seconds,
        "break_even": break_even,
        "margin": margin,
        "gpu_count": usage.gpu_count,
        "current_plan": entry.current_plan,
        "price_per_gpu_hour": {"on_demand": od, "reserved": res},
    }
    subject = f"model:{usage.model}"
    return make(
        RecommendationKind.PRICING_PLAN,
        subject,
        ctx,
        title=f"Switch {usage.gpu_count} {usage.model} GPU(s) to {target}: "
        f"allocated {allocated:.0%} vs break-even {break_even:.0%}",
        evidence=evidence,
        savings=ctx.savings(money, 0.0),
    )
