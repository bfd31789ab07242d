"""Broken-GPU recommendations (collector/recommend/broken_gpus.py): GPUs missing from their
node, and money spent on GPUs held while off the bus, XID-faulted, ECC-degraded or
throttled, per node, workload and condition."""

from __future__ import annotations

import dataclasses

import pytest

from collector.analysis.broken_gpus import Condition, condition_of
from collector.analysis.carbon import CarbonContext
from collector.analysis.cost import PriceBook
from collector.analysis.verdicts import BottleneckPolicy
from collector.config import AnalysisSettings
from collector.recommend.broken_gpus import broken_gpus, expected_gpus
from collector.recommend.rules import RecommendPolicy, RuleContext
from collector.records import GpuState, GpuView, Recommendation, RecommendationKind
from tests.collector.recommend.work_windows import JOB, gpu, window

NOW = 1_800_000_000.0
PRICES = PriceBook.example()
CARBON = CarbonContext(pue=1.2, intensity_g_per_kwh=400.0)
POLICY = RecommendPolicy.default()


def price(node: str = "n1") -> float:
    entry = PRICES.model_price("H100", node)
    assert entry is not None
    return entry.per_gpu_hour(entry.current_plan)


def ctx(settings: AnalysisSettings | None = None) -> RuleContext:
    return RuleContext(PRICES, CARBON, settings or AnalysisSettings(), POLICY, NOW)


def view(i: int, node: str = "n1", seen_ago: float = 1.0, healthy: bool = True) -> GpuView:
    return GpuView(uuid=f"{node}-GPU-{i}", node=node, index=i, model="H100",
                   name="NVIDIA H100", state=GpuState.ACTIVE if seen_ago < 60 else
                   GpuState.UNKNOWN, last_seen=NOW - seen_ago, healthy=healthy)  # fmt: skip


def only(recs: list[Recommendation]) -> Recommendation:
    assert len(recs) == 1, recs
    assert recs[0].kind is RecommendationKind.BROKEN_GPUS
    return recs[0]


def test_a_gpu_gone_silent_while_its_node_reports_is_missing() -> None:
    gpus = [view(0), view(1), view(2), view(3, seen_ago=600.0)]
    rec = only(broken_gpus(gpus, [], ctx(), {}))
    assert rec.subject == "n1" and rec.gpu_uuids == ("n1-GPU-3",)
    ev = rec.evidence
    assert (ev["expected_gpus"], ev["working_gpus"]) == (4, 3)
    assert ev["missing_gpus"] == ["n1-GPU-3"]
    assert ev["missing_per_hour"] == pytest.approx(price())
    assert ev["crippled_capacity_per_hour"] == pytest.approx(3 * price())
    assert rec.savings.money_per_hour == pytest.approx(price())
    assert "3 of 4 GPUs working" in rec.title


def test_a_silent_node_is_unknown_not_short() -> None:
    gpus = [view(i, seen_ago=600.0) for i in range(4)]
    assert broken_gpus(gpus, [], ctx(), {}) == []
    assert broken_gpus([view(i) for i in range(4)], [], ctx(), {}) == []


def test_a_lost_gpu_still_reporting_is_not_working() -> None:
    gpus = [view(0), view(1, healthy=False)]
    ev = only(broken_gpus(gpus, [], ctx(), {})).evidence
    assert (ev["working_gpus"], ev["lost_gpus"], ev["missing_gpus"]) == (1, ["n1-GPU-1"], [])


def test_the_expected_count_comes_from_the_label_over_the_setting() -> None:
    seven = [view(i) for i in range(7)]
    settings = AnalysisSettings(expected_gpus_per_node=8)
    ev = only(broken_gpus(seven, [], ctx(settings), {})).evidence
    assert (ev["expected_gpus"], ev["working_gpus"]) == (8, 7)
    assert broken_gpus(seven, [], ctx(settings), {"n1": {"expected_gpus": "7"}}) == []
    assert broken_gpus(seven, [], ctx(), {}) == []
    assert expected_gpus({"expected_gpus": "eight"}) is None


def test_money_on_gpus_held_while_broken_by_node_workload_and_condition() -> None:
    lost = gpu(0, samples=360, unhealthy_samples=360, sm_mean=None, used_share=0.0)
    xid = gpu(1, fault_xid_samples=3)
    remap = gpu(2, remap_pending_samples=10)
    hot = gpu(3, node="n2", throttled_share=0.8, clock_ratio=0.6)
    healthy = gpu(4, node="n2")
    recs = broken_gpus([], [window([lost, xid, remap, hot, healthy])], ctx(), {})
    assert [r.subject for r in recs] == ["n1", "n2"]
    n1, n2 = (r.evidence for r in recs)
    assert n1["broken_by_condition"] == pytest.approx(
        {"off_bus": price(), "xid": price(), "ecc": price()}
    )
    assert n1["broken_by_workload"] == pytest.approx({JOB.key: 3 * price()})
    assert n2["broken_by_condition"] == pytest.approx({"throttled": 0.8 * price("n2")})
    assert recs[1].gpu_uuids == ("GPU-3",)
    assert "expected_gpus" not in n1  # no views: nothing to say about the count
    assert sum(r.savings.money_per_hour for r in recs) == pytest.approx(3.8 * price())


def test_conditions_follow_the_verdicts_thresholds() -> None:
    policy = BottleneckPolicy()
    assert condition_of(gpu(0), policy) is None
    half_lost = gpu(0, samples=100, unhealthy_samples=50)
    assert condition_of(half_lost, policy) == (Condition.OFF_BUS, 0.5)
    mild = gpu(0, throttled_share=0.3, clock_ratio=0.6)
    assert condition_of(mild, policy) is None
    fast = gpu(0, throttled_share=0.9, clock_ratio=0.95)
    assert condition_of(fast, policy) is None
    ecc = dataclasses.replace(gpu(0), ecc_uncorrected_increase=2)
    assert condition_of(ecc, policy) == (Condition.ECC, 1.0)


def test_a_window_too_short_says_nothing_about_held_gpus() -> None:
    lost = gpu(0, samples=10, unhealthy_samples=10, sm_mean=None, used_share=0.0)
    assert broken_gpus([], [window([lost], seconds=120.0)], ctx(), {}) == []
