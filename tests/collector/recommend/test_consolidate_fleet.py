"""scale_down and consolidate through the real recommender over a real core, held to the
simulator's ground truth: who holds which GPU, and what the price book charges."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.sources.simulated.source import DEFAULT_START_TIME, SimulatedFleet, build_fleet
from collector.analysis.cost import PriceBook
from collector.config import CollectorSettings
from collector.records import Recommendation, RecommendationKind
from tests.collector.recommend.sim_feed import Rig, node_with_jobs

T0 = DEFAULT_START_TIME
PRICES = PriceBook.example()
HOUR = 3600.0
STEP = 30.0
H100 = PRICES.price_per_gpu_hour("H100")


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path, T0, CollectorSettings(), PRICES)
    yield r
    r.close()


def held(fleet: SimulatedFleet, node_name: str, at: float) -> list[str]:
    node = next(n for n in fleet.nodes if n.name == node_name)
    return [g.info.uuid for g in node.gpus if fleet.holder(g.info.uuid, at) is not None]


def test_demo_fleet_gets_no_scale_down_for_nodes_with_busy_gpus(rig: Rig) -> None:
    """The demo's 4 x 8 fleet: gpu-node-00 has 6 held GPUs and 2 free ones. Before the fix
    it got "scale down gpu-node-00" (whole_node=false) for the 2 free GPUs."""
    fleet = build_fleet(start_time=T0)
    rig.feed(fleet.nodes, T0 + HOUR, STEP)
    assert len(held(fleet, "gpu-node-00", rig.now)) == 6
    scale_downs = rig.recommendations(RecommendationKind.SCALE_DOWN)
    busy = [r.node for r in scale_downs if held(fleet, r.node, rig.now)]
    assert busy == []
    # every node holds work (13 H100 GPUs held on 16): no node can be freed either
    assert scale_downs == rig.recommendations(RecommendationKind.CONSOLIDATE) == []


def check_plan(fleet: SimulatedFleet, rec: Recommendation, at: float) -> None:
    """One consolidate recommendation against the truth: the moves take every job off the
    node whole, onto GPUs that are free, of the same model, each used once."""
    node = next(n for n in fleet.nodes if n.name == rec.node)
    jobs = {j.workload.key: len(j.gpu_indexes) for j in fleet.jobs if j.node == node.name}
    moves = rec.evidence["moves"]
    assert isinstance(moves, list)
    moved = {w: m["gpus"] for m in moves for w in m["workloads"]}
    assert moved == jobs  # every job on the node, each with all its GPUs
    onto = [u for m in moves for u in m["to_gpus"]]
    assert len(onto) == len(set(onto)) == sum(jobs.values())
    for m in moves:
        target = next(n for n in fleet.nodes if n.name == m["to_node"])
        assert target.name != node.name
        for uuid in m["to_gpus"]:
            assert fleet.holder(uuid, at) is None  # free in truth
            assert fleet.gpu(uuid).model == node.gpus[0].model  # same GPU model
            assert fleet.node_of(uuid) is target  # a job's GPUs on one target node
    price = sum(PRICES.price_per_gpu_hour(g.model.key, node.name) for g in node.gpus)
    assert rec.savings.money_per_hour == pytest.approx(price)
    assert rec.evidence["freed_gpus"] == len(node.gpus)


def test_consolidate_frees_whole_nodes_of_a_larger_simulated_fleet(rig: Rig) -> None:
    """24 x 8 GPUs: free GPUs are scattered one or two a node, so no node scales down, but
    the 7 single-GPU jobs of an H100 node fit on the other H100 nodes' free GPUs."""
    fleet = build_fleet(nodes=24, start_time=T0)
    rig.feed(fleet.nodes, T0 + HOUR, STEP, per_batch=20)
    assert rig.recommendations(RecommendationKind.SCALE_DOWN) == []
    recs = rig.recommendations(RecommendationKind.CONSOLIDATE)
    assert recs, "no consolidation found in a fleet where one exists"
    for rec in recs:
        check_plan(fleet, rec, rig.now)
    freed = {r.node for r in recs}
    targets = {m["to_node"] for r in recs for m in r.evidence["moves"]}  # type: ignore[attr-defined]
    assert not freed & targets  # a freed node receives nothing
    # every target GPU is used by one plan only
    used = Counter(u for r in recs for m in r.evidence["moves"] for u in m["to_gpus"])  # type: ignore[attr-defined]
    assert set(used.values()) == {1}


def test_consolidate_keeps_a_multi_gpu_job_on_one_node_and_whole_idle_nodes_scale_down(
    rig: Rig,
) -> None:
    """n1 runs a 2-GPU job beside 2 free GPUs; n2 and n3 run 3 one-GPU jobs each beside
    one free GPU; n4 is entirely free. n1's job cannot be split over n2's and n3's single
    free GPUs; n2's three jobs fit on n1 (2) and n3 (1). n4 is a scale-down, not room to
    consolidate into (moving work there would keep a node that could go)."""
    nodes = [
        node_with_jobs("n1", "H100", [(0, 1)], 4, T0),
        node_with_jobs("n2", "H100", [(0,), (1,), (2,)], 4, T0),
        node_with_jobs("n3", "H100", [(0,), (1,), (2,)], 4, T0),
        node_with_jobs("n4", "H100", [], 4, T0),
    ]
    fleet = SimulatedFleet(nodes)
    rig.feed(nodes, T0 + HOUR, STEP)
    [down] = rig.recommendations(RecommendationKind.SCALE_DOWN)
    assert (down.node, down.evidence["whole_node"]) == ("n4", True)
    assert down.savings.money_per_hour == pytest.approx(4 * H100)
    [rec] = rig.recommendations(RecommendationKind.CONSOLIDATE)
    assert rec.node in ("n2", "n3")
    check_plan(fleet, rec, rig.now)
    assert {m["to_node"] for m in rec.evidence["moves"]} == {
        "n1",
        ({"n2", "n3"} - {rec.node}).pop(),
    }  # type: ignore[attr-defined]


def test_consolidate_prices_the_freed_node_with_its_override(tmp_path: Path) -> None:
    """Two nodes could each be drained into the other's room; the plan frees the one that
    costs more (an override prices n2's H100s at 2.10/h, n1's pay the book's 6.88/h)."""
    book = PriceBook.from_mapping({
        "currency": "USD",
        "models": {"H100": {"on_demand_per_gpu_hour": H100, "reserved_per_gpu_hour": 4.27}},
        "node_overrides": {"n2": {"H100": {"on_demand_per_gpu_hour": 2.10}}},
    })  # fmt: skip
    nodes = [
        node_with_jobs("n1", "H100", [(0,)], 4, T0),
        node_with_jobs("n2", "H100", [(0,)], 4, T0),
    ]
    rig = Rig(tmp_path, T0, CollectorSettings(), book)
    try:
        rig.feed(nodes, T0 + HOUR, STEP)
        [rec] = rig.recommendations(RecommendationKind.CONSOLIDATE)
    finally:
        rig.close()
    assert rec.node == "n1"
    assert rec.savings.money_per_hour == pytest.approx(4 * H100)
