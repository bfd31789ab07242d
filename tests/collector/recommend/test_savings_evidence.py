"""Every saving states the window it was observed over, and its range and confidence
follow from that window: the demo fleet through the real recommender over a real core,
held to the simulator's true idle intervals."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.sources.simulated.source import DEFAULT_START_TIME, SEGMENT_SECONDS, build_fleet
from collector.analysis.cost import PriceBook
from collector.config import CollectorSettings
from collector.records import RecommendationKind
from tests.collector.recommend.sim_feed import Rig

T0 = DEFAULT_START_TIME
STEP = SEGMENT_SECONDS  # every segment sampled: no burst falls between two samples
WEEK = 7 * 24 * 3600.0


def test_release_savings_state_the_idle_window_behind_them(tmp_path: Path) -> None:
    """90 minutes in, a stuck job has been idle for at most 1.5 h: before the fix its
    recommendation claimed 730 h of waste with nothing to say how little was seen."""
    fleet = build_fleet(start_time=T0)
    rig = Rig(tmp_path, T0, CollectorSettings(), PriceBook.example())
    try:
        rig.feed(fleet.nodes, T0 + 1.5 * 3600, STEP, per_batch=60)
        recs = rig.recommendations(RecommendationKind.RELEASE_IDLE)
    finally:
        rig.close()
    assert recs
    for rec in recs:
        # the workload has been idle since the latest true idle start of its GPUs
        starts = [fleet.true_idle_intervals(u, T0, rig.now)[-1][0] for u in rec.gpu_uuids]
        true_window = rig.now - max(starts)
        s = rec.savings
        assert s.evidence_seconds == pytest.approx(true_window, abs=STEP)
        assert s.evidence_seconds <= 1.5 * 3600
        assert s.money_per_month_low == pytest.approx(s.money_per_hour * s.evidence_seconds / 3600)
        assert s.money_per_month_low < s.money_per_month / 400  # 1.5 h of 730 h at most
        assert s.confidence == pytest.approx(s.evidence_seconds / WEEK)
