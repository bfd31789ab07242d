"""Right-sizing: a workload whose needs fit a MIG slice of its GPU or a cheaper GPU model.

Needs are the observed p95 memory (or the peak, whichever is larger after headroom) and
the peak SM activity scaled by the model's relative compute, plus headroom. A MIG slice of
the same model is preferred (same hardware, same node); else the cheapest priced model
that fits. Nothing is recommended before ``right_size_min_seconds`` of history.
"""

from __future__ import annotations

from collections.abc import Sequence

from collector.analysis.gpu_models import GpuModel, MigProfile
from collector.analysis.mig_price import slice_fraction
from collector.recommend.rules import RuleContext, make
from collector.records import Recommendation, RecommendationKind, WorkloadProfile


def right_size(profiles: Sequence[WorkloadProfile], ctx: RuleContext) -> list[Recommendation]:
    """One per workload, observed long enough, whose needs fit a MIG slice of its own
    model (preferred: same hardware, same node) or else a cheaper model."""
    out = []
    for profile in profiles:
        if profile.observed_seconds < ctx.settings.right_size_min_seconds:
            continue
        current = ctx.policy.catalogue.get(profile.gpu_model)
        if current is None or not ctx.prices.has_price(current.name):
            continue
        rec = _right_size(profile, current, ctx)
        if rec is not None:
            out.append(rec)
    return out


def _right_size(
    profile: WorkloadProfile, current: GpuModel, ctx: RuleContext
) -> Recommendation | None:
    headroom = 1.0 + ctx.policy.right_size_headroom
    need_memory = max(profile.memory_p95_bytes * headroom, float(profile.memory_peak_bytes))
    need_compute = profile.sm_activity_peak * current.relative_compute * headroom
    basis = ctx.prices.mig_price_basis
    # a workload on a MIG slice ("H100 MIG 3g.40gb") pays its slice: only a smaller one saves
    on_slice = profile.gpu_model.partition(" MIG ")[2]
    fraction = slice_fraction(current, on_slice, basis=basis) if on_slice else 1.0
    whole = ctx.prices.price_per_gpu_hour(current.name)
    price = whole * fraction
    target = _fitting_mig(current, need_memory, need_compute, whole, basis, fraction)
    if target is None and not on_slice:  # off a slice: its power is not the slice's
        target = _fitting_model(current, need_memory, need_compute, price, ctx)
    if target is None:
        return None
    name, target_price, watts_saved = target
    money = (price - target_price) * profile.gpu_count
    savings = ctx.savings(
        money, watts_saved * profile.gpu_count, evidence_seconds=profile.observed_seconds
    )
    evidence: dict[str, object] = {
        "observed_seconds": profile.observed_seconds,
        "memory_p95_bytes": profile.memory_p95_bytes,
        "memory_peak_bytes": profile.memory_peak_bytes,
        "sm_activity_peak": profile.sm_activity_peak,
        "sm_activity_p95": profile.sm_activity_p95,
        "headroom": ctx.policy.right_size_headroom,
        "current": profile.gpu_model if on_slice else current.name,
        "target": name,
        "price_per_gpu_hour": {"current": price, "target": target_price},
    }
    key = profile.workload.key
    return make(
        RecommendationKind.RIGHT_SIZE,
        key,
        ctx,
        title=f"Right-size {key}: {evidence['current']} -> {name}, "
        f"{money:.2f} {savings.currency}/h",
        evidence=evidence,
        savings=savings,
        workload_key=key,
        namespace=profile.workload.namespace,
    )


def _fitting_mig(
    model: GpuModel, memory: float, compute: float, whole: float, basis: str, below: float
) -> tuple[str, float, float] | None:
    """The cheapest MIG slice that fits and costs less than the share ``below`` (1: the
    whole GPU; a slice's own for a workload on one), priced as accounting prices it
    (``mig_price.slice_fraction`` of ``whole`` on the price book's basis); energy saving
    counted as 0 (the parent keeps running; its other slices serve other work)."""
    fits: list[tuple[float, float, MigProfile]] = [
        (fraction, p.memory_bytes, p)
        for p in model.mig_profiles
        if (fraction := slice_fraction(model, p.name, basis=basis)) < below
        and p.compute_fraction < 1.0
        and p.memory_bytes >= memory
        and p.compute_fraction * model.relative_compute >= compute
    ]
    if not fits:
        return None
    fraction, _, best = min(fits, key=lambda f: (f[0], f[1]))
    return f"{model.name} MIG {best.name}", whole * fraction, 0.0


def _fitting_model(
    current: GpuModel, memory: float, compute: float, price: float, ctx: RuleContext
) -> tuple[str, float, float] | None:
    """The cheapest priced model that fits and costs less; energy saving = the difference
    in idle power (the floor both draw), a conservative estimate."""
    fits = [
        (ctx.prices.price_per_gpu_hour(m.name), m)
        for m in ctx.policy.catalogue.models.values()
        if m.name != current.name
        and ctx.prices.has_price(m.name)
        and m.memory_bytes >= memory
        and m.relative_compute >= compute
    ]
    cheaper = [(p, m) for p, m in fits if p < price]
    if not cheaper:
        return None
    target_price, best = min(cheaper, key=lambda f: f[0])
    return best.name, target_price, max(0.0, current.idle_watts - best.idle_watts)
