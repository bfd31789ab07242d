"""Pricing-plan advice through the real recommender over a real core: a node whose
price-book override already puts it on reserved pricing is judged at its own plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.sources.simulated.source import DEFAULT_START_TIME
from collector.analysis.cost import PriceBook
from collector.config import AnalysisSettings, CollectorSettings
from collector.records import RecommendationKind
from tests.collector.recommend.sim_feed import Rig, node_with_jobs

T0 = DEFAULT_START_TIME
LOOKBACK = 4 * 3600.0
OD, RES = 6.88, 4.27
BOOK = PriceBook.from_mapping({
    "currency": "USD",
    "models": {"H100": {"on_demand_per_gpu_hour": OD, "reserved_per_gpu_hour": RES}},
    "node_overrides": {"reserved-node": {"H100": {"current_plan": "reserved"}}},
})  # fmt: skip


def test_a_node_already_reserved_is_not_counted_at_the_on_demand_price(tmp_path: Path) -> None:
    """Two nodes of 2 H100s, each GPU held by a job the whole look-back (allocated 100 %).
    Only the on-demand node's 2 GPUs can switch: 2 x (6.88 - 4.27) = 5.22/h. Before the
    fix the reserved node was counted at on demand too: 10.44/h for 4 GPUs."""
    nodes = [
        node_with_jobs("on-demand-node", "H100", [(0,), (1,)], 2, T0),
        node_with_jobs("reserved-node", "H100", [(0,), (1,)], 2, T0),
    ]
    settings = CollectorSettings(analysis=AnalysisSettings(pricing_lookback_seconds=LOOKBACK))
    rig = Rig(tmp_path, T0, settings, BOOK)
    try:
        rig.feed(nodes, T0 + LOOKBACK, 60.0, per_batch=30)
        recs = rig.recommendations(RecommendationKind.PRICING_PLAN)
    finally:
        rig.close()
    # the on-demand node's allocated fraction in truth, on a 60 s grid over the look-back
    node = nodes[0]
    grid = [T0 + i * 60.0 for i in range(int(LOOKBACK / 60))]
    held = sum(node.holder(g.info.uuid, t) is not None for g in node.gpus for t in grid) / (
        len(node.gpus) * len(grid)
    )
    [rec] = recs
    assert rec.savings.money_per_hour == pytest.approx(2 * (OD * held - RES), rel=0.005)
    assert rec.evidence["gpu_count"] == 2
    assert rec.evidence["nodes"] == ["on-demand-node"]
    assert "reserved" in rec.title
