"""Pricing-plan advice through the real recommender over a real ledger holding 30 days of
hourly rollups, written with the ledger's own write API from a known schedule (the truth
below), so the optimum can be computed here by brute force over every reserved count.

The fleet: node train-1, 8 H100, a training job holding 6 of them every hour (2 free);
nodes serve-1 and serve-2, 8 H100 each, serving inference whose replicas follow the day:
r(h) = 3 + 5 (1 + cos(2 pi (h - 14) / 24)) / 2 GPUs per node (3 at night, 8 at 14:00
UTC), the i-th replica GPU allocated for clamp(r - i, 0, 1) of the hour and active 40 %
of that; node onprem-1, 4 H100 already paid for (a price-book override, 2.10/h on either
"plan", reserved), fully allocated.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from collector.analysis.cost import PriceBook
from collector.config import CollectorSettings
from collector.ledger.records import GpuRecord, LedgerWrite
from collector.records import HOUR_SECONDS, MONTH_HOURS, RecommendationKind, Usage
from tests.collector.recommend.sim_feed import Rig

END = 1_767_225_600.0  # 2026-01-01T00:00Z, an hour boundary
HOURS = 30 * 24
OD, RES = 6.88, 4.27
BOOK = PriceBook.from_mapping({
    "currency": "USD",
    "models": {"H100": {"on_demand_per_gpu_hour": OD, "reserved_per_gpu_hour": RES}},
    "node_overrides": {"onprem-1": {"H100": {
        "on_demand_per_gpu_hour": 2.1, "reserved_per_gpu_hour": 2.1, "current_plan": "reserved",
    }}},
})  # fmt: skip


def replicas(hour_of_day: int) -> float:
    return 3 + 5 * (1 + math.cos(2 * math.pi * (hour_of_day - 14) / 24)) / 2


def truth() -> tuple[dict[tuple[float, str], Usage], dict[str, GpuRecord], list[float]]:
    """Hourly usage per GPU, the GPUs, and the book-priced pool's curve d_h (GPUs)."""
    usage: dict[tuple[float, str], Usage] = {}
    gpus: dict[str, GpuRecord] = {}
    curve = []
    nodes = {"train-1": 8, "serve-1": 8, "serve-2": 8, "onprem-1": 4}
    for node, count in nodes.items():
        for i in range(count):
            uuid = f"GPU-{node}-{i}"
            gpus[uuid] = GpuRecord(
                uuid, node, "H100", "NVIDIA H100 80GB HBM3", i, END - HOURS * 3600, END
            )
    for h in range(HOURS):
        start = END - (HOURS - h) * HOUR_SECONDS
        demand = 0.0
        for node, count in nodes.items():
            for i in range(count):
                held = _held(node, i, h)
                demand += held if node != "onprem-1" else 0.0
                active = held * (0.4 if node.startswith("serve") else 1.0)
                usage[(start, f"GPU-{node}-{i}")] = Usage(
                    active_seconds=active * HOUR_SECONDS,
                    idle_seconds=(1 - active) * HOUR_SECONDS,
                    allocated_idle_seconds=(held - active) * HOUR_SECONDS,
                )
        curve.append(demand)
    return usage, gpus, curve


def _held(node: str, index: int, hour: int) -> float:
    if node == "train-1":
        return 1.0 if index < 6 else 0.0
    if node == "onprem-1":
        return 1.0
    return min(max(replicas(hour % 24) - index, 0.0), 1.0)


def cost(curve: list[float], reserved: int) -> float:
    return reserved * RES * len(curve) + OD * sum(max(d - reserved, 0.0) for d in curve)


def test_the_recommended_mix_is_the_brute_force_optimum(tmp_path: Path) -> None:
    usage, gpus, curve = truth()
    rig = Rig(tmp_path, END, CollectorSettings(), BOOK)
    try:
        rig.core.ledger.commit(LedgerWrite(gpu_usage=usage, gpus=gpus))
        recs = rig.recommendations(RecommendationKind.PRICING_PLAN)
    finally:
        rig.close()
    [rec] = recs  # the on-prem pool: no commitment is cheaper than its own price
    assert rec.subject == "model:H100"
    brute = {k: cost(curve, k) for k in range(25)}
    best = min(brute, key=lambda k: brute[k])
    month = MONTH_HOURS / HOURS
    costs = rec.evidence["cost_per_month"]
    assert isinstance(costs, dict)
    assert costs["recommended"] == pytest.approx(brute[best] * month, rel=0.005)
    assert costs["recommended"] < costs["all_on_demand"] == pytest.approx(cost(curve, 0) * month)
    assert costs["recommended"] < costs["all_reserved"] == pytest.approx(brute[24] * month)
    assert rec.evidence["recommended"] == {"plan": "1y", "gpus": best}
    assert 6 + 2 * 3 <= best < 24  # training and the night-time replicas, not the peak
    assert rec.title.startswith(f"Reserve {best} of 24 H100 on a 1-year plan, keep {24 - best}")
    saving = (brute[0] - brute[best]) / HOURS
    assert rec.savings.money_per_hour == pytest.approx(saving, rel=0.005)
