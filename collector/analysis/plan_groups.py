"""The groups plans are judged for: a GPU model and the price entry its nodes pay.

A price book's per-node overrides may give a node its own prices and plan (an on-prem box
already paid for, a node already reserved); the nodes paying one entry are one pool. Each
pool gets its own allocation curve and is judged at its own prices and today's mix, so a
node already reserved is never priced on demand.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from collector.analysis.cost import ModelPrice, PriceBook, canonical_model
from collector.analysis.plans import ALL_ON_DEMAND, GroupPrices, Mix
from collector.analysis.price_plans import ON_DEMAND
from collector.records import HOUR_SECONDS, ModelHour, ModelUsage


@dataclass(frozen=True, slots=True)
class PlanGroup:
    """One pool's GPUs over the window: ``allocated_gpus[i]`` and ``active_gpus[i]`` are
    the mean numbers of its GPUs allocated and active in the hour ``hour_starts[i]``
    (hours without data are left out)."""

    model: str
    entry: ModelPrice
    subject: str
    nodes: tuple[str, ...]
    gpu_count: int
    observed_seconds: float
    hour_starts: tuple[float, ...]
    allocated_gpus: tuple[float, ...]
    active_gpus: tuple[float, ...]

    @property
    def coverage_seconds(self) -> float:
        """Seconds of known data per GPU."""
        return self.observed_seconds / self.gpu_count if self.gpu_count else 0.0


def plan_groups(
    models: Sequence[ModelUsage], hours: Sequence[ModelHour], prices: PriceBook
) -> list[PlanGroup]:
    """The pools, sorted by subject; nodes without a price are left out."""
    usage: dict[tuple[str, ModelPrice], list[ModelUsage]] = defaultdict(list)
    for row in models:
        entry = prices.model_price(row.model, row.node)
        if entry is not None and row.gpu_count > 0:
            usage[(canonical_model(row.model), entry)].append(row)
    curves: dict[tuple[str, ModelPrice], dict[float, list[float]]] = defaultdict(dict)
    for hour in hours:
        entry = prices.model_price(hour.model, hour.node)
        if entry is not None:
            slot = curves[(canonical_model(hour.model), entry)].setdefault(hour.hour_start, [0, 0])
            slot[0] += hour.allocated_seconds / HOUR_SECONDS
            slot[1] += hour.active_seconds / HOUR_SECONDS
    groups = [_group(key, rows, curves.get(key, {}), prices) for key, rows in usage.items()]
    return sorted(groups, key=lambda g: g.subject)


def _group(
    key: tuple[str, ModelPrice],
    rows: list[ModelUsage],
    curve: dict[float, list[float]],
    prices: PriceBook,
) -> PlanGroup:
    model, entry = key
    nodes = tuple(sorted(r.node for r in rows))
    count = sum(r.gpu_count for r in rows)
    starts = sorted(curve)
    return PlanGroup(
        model=model,
        entry=entry,
        subject=_subject(model, entry, nodes, prices),
        nodes=nodes,
        gpu_count=count,
        observed_seconds=sum(r.observed_seconds for r in rows),
        hour_starts=tuple(starts),
        allocated_gpus=tuple(min(curve[h][0], count) for h in starts),
        active_gpus=tuple(min(curve[h][1], count) for h in starts),
    )


def _subject(model: str, entry: ModelPrice, nodes: Sequence[str], prices: PriceBook) -> str:
    """``model:H100`` for the nodes at the book's price; the nodes named where an override
    sets their own."""
    if entry == prices.models.get(model):
        return f"model:{model}"
    return f"model:{model}@{','.join(nodes)}"


def group_prices(entry: ModelPrice, gpu_count: int, max_term_months: int) -> GroupPrices:
    """What a pool can buy: commitments up to ``max_term_months`` that cost less than on
    demand (a longer one is a bet a 30-day window cannot support), and today's mix."""
    od = entry.on_demand_per_gpu_hour
    options = entry.options()
    commitments = tuple(
        p
        for p in options
        if p.commitment and p.term_months <= max_term_months and p.per_gpu_hour < od
    )
    return GroupPrices(
        on_demand_per_gpu_hour=od,
        commitments=commitments,
        per_gpu_hour={p.name: p.per_gpu_hour for p in options},
        today=today_mix(entry, gpu_count),
    )


def today_mix(entry: ModelPrice, gpu_count: int) -> Mix:
    """What the pool buys today: ``current_gpus`` (all when not given) on its plan."""
    if entry.current_plan == ON_DEMAND:
        return ALL_ON_DEMAND
    count = gpu_count if entry.current_gpus is None else entry.current_gpus
    return Mix(entry.current_plan, count)
