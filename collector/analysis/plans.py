"""The reserved baseline: how many of a group's GPUs to commit to a plan, and what-if costs.

The allocation curve ``d_h`` is the mean number of the group's GPUs allocated (active or
held by a workload) in hour ``h`` of the window, ``H`` hours long. Stack the demand in
layers: the k-th GPU is in use ``f_k = (1/H) sum_h clamp(d_h - (k-1), 0, 1)`` of the hours.
Reserving it on plan p costs ``p`` every hour; renting it costs ``od`` for each hour it is
in use. So the k-th GPU is worth reserving when ``f_k > p / od`` (the plan's break-even),
and the cost over the window of reserving R GPUs and renting the rest is

    R * p * H + od * sum_h max(d_h - R, 0)

which is separable per k: choosing each k's cheaper option independently is the exact
optimum, and as ``f_k`` never grows with k, the reserved GPUs are the first R.

Assumption, said in every report: on-demand GPUs are paid per *allocated* hour. Capacity
rented on demand and left unallocated is the scale-down recommendation's business, not
the plan's. Pure functions over plain data, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from collector.analysis.price_plans import ON_DEMAND, PlanPrice

#: usage drop the risk figure assumes (the recommended mix's saving if usage falls 20 %)
RISK_USAGE_DROP = 0.2
ASSUMPTION = (
    "on-demand GPUs are paid per allocated hour (unallocated on-demand capacity is the "
    "scale-down recommendation's business); reserved GPUs are paid every hour of the window"
)


@dataclass(frozen=True, slots=True)
class Mix:
    """``reserved_gpus`` on ``plan`` (a commitment), the rest on demand."""

    plan: str
    reserved_gpus: int


ALL_ON_DEMAND = Mix(ON_DEMAND, 0)


def use_fractions(demand_gpus: Sequence[float], gpu_count: int) -> list[float]:
    """``f_k`` for k = 1..gpu_count: the share of the hours the k-th GPU is in use."""
    hours = len(demand_gpus)
    if hours == 0:
        return [0.0] * gpu_count
    return [
        sum(min(max(d - (k - 1), 0.0), 1.0) for d in demand_gpus) / hours
        for k in range(1, gpu_count + 1)
    ]


def mix_cost(
    demand_gpus: Sequence[float], mix: Mix, plan_per_gpu_hour: float, on_demand_per_gpu_hour: float
) -> float:
    """Cost over the window: the reserved GPUs every hour, the rest per allocated hour."""
    reserved = mix.reserved_gpus if mix.plan != ON_DEMAND else 0
    rented = sum(max(d - reserved, 0.0) for d in demand_gpus)
    return reserved * plan_per_gpu_hour * len(demand_gpus) + on_demand_per_gpu_hour * rented


def break_even(plan: PlanPrice, on_demand_per_gpu_hour: float) -> float:
    """The share of hours above which a GPU costs less on ``plan`` than on demand."""
    if on_demand_per_gpu_hour <= 0:
        return float("inf")
    return plan.per_gpu_hour / on_demand_per_gpu_hour


def best_mix(
    fractions: Sequence[float], commitments: Sequence[PlanPrice], on_demand_per_gpu_hour: float
) -> Mix:
    """The exact optimum: each k on its cheapest option. With hourly equivalents the
    cheapest commitment wins every k it wins at all, so one plan and a count suffice."""
    if not commitments:
        return ALL_ON_DEMAND
    plan = min(commitments, key=lambda p: p.per_gpu_hour)
    count = sum(f > break_even(plan, on_demand_per_gpu_hour) for f in fractions)
    return Mix(plan.name, count) if count else ALL_ON_DEMAND


def sticky_count(fractions: Sequence[float], threshold: float, held: int, margin: float) -> int:
    """Hysteresis: the count worth reserving at break-even ``threshold``, except that
    ``held`` (what is reserved or recommended now) stands while every GPU it covers is in
    use more than ``threshold - margin`` and none beyond it more than ``threshold + margin``.
    So a count near the line does not flap between 11 and 12."""
    exact = sum(f > threshold for f in fractions)
    up = sum(f > threshold + margin for f in fractions)
    down = sum(f > threshold - margin for f in fractions)
    return held if up <= held <= down else exact


@dataclass(frozen=True, slots=True)
class Costs:
    """Cost over the window under each mix, in the book's currency."""

    today: float
    recommended: float
    all_on_demand: float
    all_reserved: float


@dataclass(frozen=True, slots=True)
class WhatIf:
    """One group's plans: the mix recommended, and what each mix costs over ``hours``, on
    the allocation curve and with idle GPU-hours removed (``busy``: only active hours)."""

    gpu_count: int
    hours: int
    fractions: tuple[float, ...]
    today: Mix
    recommended: Mix
    costs: Costs
    #: the optimum on the busy curve, and every mix's cost there
    recommended_busy: Mix
    busy: Costs
    #: the recommended mix's saving over today's if usage drops by RISK_USAGE_DROP
    saving_if_usage_drops: float

    @property
    def saving(self) -> float:
        return self.costs.today - self.costs.recommended


@dataclass(frozen=True, slots=True)
class GroupPrices:
    """What one group of GPUs can buy: on demand, the commitments it may take, today's mix."""

    on_demand_per_gpu_hour: float
    commitments: tuple[PlanPrice, ...]
    #: every plan's hourly price by name (today's plan may be one not recommended)
    per_gpu_hour: dict[str, float]
    today: Mix

    def price(self, mix: Mix) -> float:
        return self.per_gpu_hour.get(mix.plan, self.on_demand_per_gpu_hour)


def what_if(
    allocated_gpus: Sequence[float],
    active_gpus: Sequence[float],
    gpu_count: int,
    prices: GroupPrices,
    recommended: Mix | None = None,
) -> WhatIf:
    """The costs of today's, the recommended (``best_mix`` unless given), all-on-demand and
    all-reserved mixes over the curve, and over the busy curve (its own optimum)."""
    fractions = use_fractions(allocated_gpus, gpu_count)
    od = prices.on_demand_per_gpu_hour
    mix = recommended or best_mix(fractions, prices.commitments, od)
    busy_mix = best_mix(use_fractions(active_gpus, gpu_count), prices.commitments, od)
    dropped = [d * (1 - RISK_USAGE_DROP) for d in allocated_gpus]
    return WhatIf(
        gpu_count=gpu_count,
        hours=len(allocated_gpus),
        fractions=tuple(fractions),
        today=prices.today,
        recommended=mix,
        costs=_costs(allocated_gpus, gpu_count, prices, mix),
        recommended_busy=busy_mix,
        busy=_costs(active_gpus, gpu_count, prices, busy_mix),
        saving_if_usage_drops=_cost(dropped, prices.today, prices) - _cost(dropped, mix, prices),
    )


def _costs(demand: Sequence[float], gpu_count: int, prices: GroupPrices, mix: Mix) -> Costs:
    cheapest = min(prices.commitments, key=lambda p: p.per_gpu_hour, default=None)
    everything = ALL_ON_DEMAND if cheapest is None else Mix(cheapest.name, gpu_count)
    return Costs(
        today=_cost(demand, prices.today, prices),
        recommended=_cost(demand, mix, prices),
        all_on_demand=_cost(demand, ALL_ON_DEMAND, prices),
        all_reserved=_cost(demand, everything, prices),
    )


def _cost(demand: Sequence[float], mix: Mix, prices: GroupPrices) -> float:
    return mix_cost(demand, mix, prices.price(mix), prices.on_demand_per_gpu_hour)
