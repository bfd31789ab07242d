"""The recommendation rules: each turns the fleet view into the recommendations it wants now.

Savings per month use MONTH_HOURS (730 h). Money is in the price book's currency at the
price of the plan the fleet pays now (``current_plan``, per node where the price book
overrides it); energy is IT energy (kWh, before PUE); carbon applies the site PUE and the
node's grid intensity. Every saving states its observation window (``Savings``): a month
extrapolated from 90 minutes of idling is the top of a range, not a promise.
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
    HOUR_SECONDS,
    MONTH_HOURS,
    GpuState,
    GpuView,
    Recommendation,
    RecommendationKind,
    RecommendationStatus,
    Savings,
    WorkloadRef,
)

WEEK_SECONDS = 7 * 24 * 3600.0


@dataclass(frozen=True)
class RecommendPolicy:
    """Knobs AnalysisSettings does not carry (yet)."""

    catalogue: GpuCatalogue
    #: right-sizing keeps this much memory and compute above the observed need
    right_size_headroom: float = 0.2
    #: hysteresis of pricing advice: the count reserved (or recommended) now stands while
    #: its GPUs' shares of hours in use stay within this of the break-even
    pricing_margin: float = 0.1
    #: pricing advice needs this much known data per GPU (a week: the weekly cycle)
    pricing_min_coverage_seconds: float = WEEK_SECONDS
    #: a saving's confidence reaches 1 once its observation window is this long: a week
    #: covers the weekday/weekend cycle most GPU demand follows
    full_confidence_seconds: float = WEEK_SECONDS

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

    def savings(
        self, money_per_hour: float, watts: float, node: str = "", *, evidence_seconds: float
    ) -> Savings:
        """The saving of ``money_per_hour`` and ``watts`` extrapolated to a month, with the
        range and confidence that ``evidence_seconds`` of observation support."""
        kwh = max(0.0, watts) * MONTH_HOURS / 1000.0
        evidence = max(0.0, evidence_seconds)
        seen_hours = min(evidence / HOUR_SECONDS, MONTH_HOURS)
        return Savings(
            money_per_month=money_per_hour * MONTH_HOURS,
            energy_kwh_per_month=kwh,
            carbon_kg_per_month=self.carbon.kg_for_kwh(kwh, node),
            currency=self.prices.currency,
            money_per_hour=money_per_hour,
            evidence_seconds=evidence,
            money_per_month_low=money_per_hour * seen_hours,
            confidence=min(1.0, evidence / self.policy.full_confidence_seconds),
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
    """One per workload whose GPUs are *all* idle for it past the idle window: allocated-
    idle, or, on a shared GPU, its own share of it idle while another holder keeps the GPU
    busy ("holds 20 % of an H100 and used none of it for 2 h").

    A workload with any GPU active for it or unknown gets none: a job using some of its
    GPUs is a right-sizing matter, and unknown data never triggers a release. A shared GPU
    counts the holder's price fraction (analysis/shared.py) towards it, else 1/n.
    """
    held: dict[str, tuple[WorkloadRef, list[GpuView]]] = {}
    for view in gpus:
        for ref in view.workloads:
            held.setdefault(ref.key, (ref, []))[1].append(view)
    window = ctx.settings.idle_window_seconds
    out = []
    for ref, views in held.values():
        starts = [_idle_since_for(v, ref.key) for v in views]
        if None in starts:
            continue
        idle_since = max(s for s in starts if s is not None)
        if ctx.now - idle_since >= window:
            out.append(_release(ref, views, idle_since, ctx))
    return out


def _idle_since_for(view: GpuView, key: str) -> float | None:
    """When the GPU became idle for holder ``key``: its idle episode, or on a shared GPU
    the holder's own idle run; None when it is not idle for it (or unknown)."""
    if view.state is GpuState.ALLOCATED_IDLE:
        own = view.holders_idle_since.get(key)
        return (
            view.idle_since if own is None or view.idle_since is None else min(own, view.idle_since)
        )
    if view.state is GpuState.ACTIVE:
        return view.holders_idle_since.get(key)
    return None


def holder_fraction(view: GpuView, key: str) -> float:
    """The part of ``view``'s price holder ``key`` carries: its fraction on a shared GPU,
    else an equal part."""
    return view.holder_fractions.get(key, 1.0 / max(1, len(view.workloads)))


def _release(
    ref: WorkloadRef, views: list[GpuView], idle_since: float, ctx: RuleContext
) -> Recommendation:
    money = sum(ctx.gpu_price(v) * holder_fraction(v, ref.key) for v in views)
    # a part idle beside a busy holder draws nothing of its own to save
    watts = sum(
        ctx.idle_watts(v) * holder_fraction(v, ref.key)
        for v in views
        if v.state is GpuState.ALLOCATED_IDLE
    )
    nodes = sorted({v.node for v in views})
    models = ", ".join(sorted({v.model for v in views}))
    savings = ctx.savings(money, watts, nodes[0], evidence_seconds=ctx.now - idle_since)
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
        f"Release {len(views)} idle {models} GPU{'' if len(views) == 1 else 's'} held by "
        f"{ref.key}: "
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


def by_node(gpus: Sequence[GpuView]) -> dict[str, list[GpuView]]:
    """The views grouped by node, nodes in name order."""
    nodes: dict[str, list[GpuView]] = defaultdict(list)
    for view in gpus:
        nodes[view.node].append(view)
    return dict(sorted(nodes.items()))


def physical(views: Sequence[GpuView]) -> list[GpuView]:
    """The physical GPUs among ``views`` (a MIG instance's power is its parent's: counting
    both would count one board twice). Prices are summed over every view instead: a MIG
    slice carries its share and the parent only what no slice covers."""
    return [v for v in views if v.mig_parent_uuid is None]


def unallocated_idle(view: GpuView, ctx: RuleContext) -> bool:
    """Nobody holds it and it has been idle for the whole idle window."""
    return (
        view.state is GpuState.UNALLOCATED
        and not view.workloads
        and view.idle_since is not None
        and view.idle_seconds(ctx.now) >= ctx.settings.idle_window_seconds
    )


def scale_down(gpus: Sequence[GpuView], ctx: RuleContext) -> list[Recommendation]:
    """One per *whole* idle node: every GPU (and MIG instance) on it unallocated and idle
    past the window. Idle GPUs on a node that also runs work cannot be scaled down without
    moving that work: that is ``consolidate``'s bin-packing, not a scale-down."""
    out = []
    for node, views in by_node(gpus).items():
        if all(unallocated_idle(v, ctx) for v in views):
            out.append(_scale_down(node, views, ctx))
    return out


def _scale_down(node: str, views: list[GpuView], ctx: RuleContext) -> Recommendation:
    gpus = physical(views)
    money = sum(ctx.gpu_price(v) for v in views)  # each view its share (price_fraction)
    watts = sum(ctx.idle_watts(v) for v in gpus)
    since = max(v.idle_since or ctx.now for v in views)
    savings = ctx.savings(money, watts, node, evidence_seconds=ctx.now - since)
    evidence: dict[str, object] = {
        "window_seconds": ctx.settings.idle_window_seconds,
        "idle_since": since,
        "idle_seconds": ctx.now - since,
        "gpus": [v.uuid for v in gpus],
        "whole_node": True,
        "power_watts": watts,
        "price_per_hour": money,
    }
    return make(
        RecommendationKind.SCALE_DOWN,
        node,
        ctx,
        title=f"Scale down node {node} (all {len(gpus)} GPUs idle, unallocated): "
        f"{money:.2f} {savings.currency}/h",
        evidence=evidence,
        savings=savings,
        gpu_uuids=tuple(v.uuid for v in gpus),
        node=node,
    )
