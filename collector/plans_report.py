"""What-if costs of buying plans (``gpufleet report --plans``, ``GET /v1/plans``), and the
fleet's utilisation against its target.

Over a period (widened to whole hours, ``usage_report.ledger_period``), per pool (a GPU
model and the price entry its nodes pay): the cost under today's mix, the cheapest mix
(collector/analysis/plans.py, the exact optimum, no hysteresis), all on demand and all
reserved; the same with idle GPU-hours removed (what releasing idle GPUs adds); and the
cheapest mix's saving if usage dropped 20 %. Commitments up to ``max_term_months`` (the
recommendations' cap, ``analysis.pricing_max_term_months``) are considered, as there.

Utilisation here is the active share of the fleet's known GPU time over the period; an
open recommendation that frees GPUs (release, scale down, consolidate) would raise it to
active / (known - the freed GPUs' hours of the period).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from collector.analysis.cost import PriceBook
from collector.analysis.plan_groups import PlanGroup, group_prices, plan_groups
from collector.analysis.plans import ASSUMPTION, RISK_USAGE_DROP, Costs, what_if
from collector.ledger.store import Ledger
from collector.records import LIVE_STATUSES, Recommendation, RecommendationKind
from collector.usage_report import PERIOD_RULE, LedgerPeriod

#: the kinds whose GPUs would leave the fleet if acted on
FREEING = (RecommendationKind.RELEASE_IDLE, RecommendationKind.SCALE_DOWN,
           RecommendationKind.CONSOLIDATE)  # fmt: skip
SCENARIOS = ("today", "recommended", "all_on_demand", "all_reserved")


class MixOut(msgspec.Struct, frozen=True):
    plan: str
    reserved_gpus: int


class CostsOut(msgspec.Struct, frozen=True):
    today: float
    recommended: float
    all_on_demand: float
    all_reserved: float


class PlanRow(msgspec.Struct, frozen=True, kw_only=True):
    subject: str
    model: str
    nodes: list[str]
    gpu_count: int
    hours: int
    today: MixOut
    recommended: MixOut
    #: recommended mix with idle GPU-hours removed
    recommended_busy: MixOut
    costs: CostsOut
    costs_idle_removed: CostsOut
    saving: float
    saving_idle_removed: float
    saving_if_usage_drops: float


class Closing(msgspec.Struct, frozen=True, kw_only=True):
    """One open recommendation and the utilisation the fleet would have after it."""

    id: str
    title: str
    gpus: int
    utilisation_after: float


class UtilisationOut(msgspec.Struct, frozen=True, kw_only=True):
    target: float
    #: active share of known GPU time over the period (None: no known time)
    actual: float | None
    gap: float | None
    closing: list[Closing]
    #: after every recommendation in ``closing``
    after_all: float | None


class PlansReport(msgspec.Struct, frozen=True, kw_only=True):
    start: float
    end: float
    asked_start: float
    asked_end: float
    rule: str
    currency: str
    assumption: str
    usage_drop: float
    rows: list[PlanRow]
    total: CostsOut
    total_idle_removed: CostsOut
    utilisation: UtilisationOut


def plans_report(
    ledger: Ledger,
    period: LedgerPeriod,
    prices: PriceBook,
    *,
    max_term_months: int,
    utilisation_target: float,
) -> PlansReport:
    """The what-if costs per pool and for the fleet over ``period``, and the utilisation
    gap with what the open recommendations would close."""
    start, end = period.start, period.end
    groups = plan_groups(ledger.model_usage(start, end), ledger.model_hours(start, end), prices)
    rows = [_row(g, max_term_months) for g in groups if g.hour_starts]
    open_recs = ledger.recommendations(LIVE_STATUSES)
    return PlansReport(
        start=start,
        end=end,
        asked_start=period.asked_start,
        asked_end=period.asked_end,
        rule=PERIOD_RULE,
        currency=prices.currency,
        assumption=ASSUMPTION,
        usage_drop=RISK_USAGE_DROP,
        rows=rows,
        total=_sum(r.costs for r in rows),
        total_idle_removed=_sum(r.costs_idle_removed for r in rows),
        utilisation=utilisation(ledger, period, utilisation_target, open_recs),
    )


def _row(group: PlanGroup, max_term_months: int) -> PlanRow:
    prices = group_prices(group.entry, group.gpu_count, max_term_months)
    plans = what_if(group.allocated_gpus, group.active_gpus, group.gpu_count, prices)
    busy = plans.recommended_busy
    return PlanRow(
        subject=group.subject,
        model=group.model,
        nodes=list(group.nodes),
        gpu_count=group.gpu_count,
        hours=plans.hours,
        today=_mix(plans.today.plan, plans.today.reserved_gpus),
        recommended=_mix(plans.recommended.plan, plans.recommended.reserved_gpus),
        recommended_busy=_mix(busy.plan, busy.reserved_gpus),
        costs=_costs(plans.costs),
        costs_idle_removed=_costs(plans.busy),
        saving=plans.saving,
        saving_idle_removed=plans.busy.today - plans.busy.recommended,
        saving_if_usage_drops=plans.saving_if_usage_drops,
    )


def _mix(plan: str, gpus: int) -> MixOut:
    return MixOut(plan, gpus)


def _costs(costs: Costs) -> CostsOut:
    return CostsOut(costs.today, costs.recommended, costs.all_on_demand, costs.all_reserved)


def _sum(costs: Iterable[CostsOut]) -> CostsOut:
    items = list(costs)
    return CostsOut(*(sum(getattr(c, s) for c in items) for s in SCENARIOS))


def utilisation(
    ledger: Ledger, period: LedgerPeriod, target: float, open_recs: Sequence[Recommendation]
) -> UtilisationOut:
    """The fleet's active share of known GPU time, and what freeing GPUs would make it."""
    gpus = ledger.usage_by_group(period.start, period.end, "node")
    active = sum(u.active_seconds for _, u in gpus)
    known = sum(u.active_seconds + u.idle_seconds for _, u in gpus)
    if known <= 0:
        return UtilisationOut(target=target, actual=None, gap=None, closing=[], after_all=None)
    span = period.seconds
    closing, freed = [], 0.0
    for rec in sorted(open_recs, key=lambda r: -len(r.gpu_uuids)):
        if rec.kind in FREEING and rec.gpu_uuids:
            seconds = len(rec.gpu_uuids) * span
            freed += seconds
            after = _share(active, known - seconds)
            closing.append(Closing(id=rec.id, title=rec.title, gpus=len(rec.gpu_uuids),
                                   utilisation_after=after))  # fmt: skip
    actual = active / known
    return UtilisationOut(
        target=target,
        actual=actual,
        gap=target - actual,
        closing=closing,
        after_all=_share(active, known - freed) if closing else actual,
    )


def _share(active: float, known: float) -> float:
    """Active over what is left, at most 1 (the freed GPUs' hours are an upper bound)."""
    return min(1.0, active / known) if known > 0 else 1.0
